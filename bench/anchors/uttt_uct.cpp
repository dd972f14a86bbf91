// Plain UCT anchor for ultimate tic-tac-toe through CodinGame's protocol (bench/README.md, issue 14).
// Build: g++ -O2 -march=native -o /tmp/cg/bot bench/anchors/uttt_uct.cpp
// Bitboards, UCB1 c=1.4, uniformly random playouts, no tree reuse; 900 ms first turn, 85 ms later.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>
#ifdef __BMI2__
#include <immintrin.h>
#endif
using namespace std;
typedef chrono::steady_clock Clock;

static bool WIN[512];
static const int LINES[8] = {7, 56, 448, 73, 146, 292, 84, 273};
static uint64_t rng_state;
static inline uint64_t xorshift() {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static inline int kth_bit(unsigned mask, int k) {  // index of the k-th set bit (k from 0)
#ifdef __BMI2__
    return __builtin_ctz(_pdep_u32(1u << k, mask));
#else
    while (k--) mask &= mask - 1;
    return __builtin_ctz(mask);
#endif
}

struct State {
    uint16_t m[2][9];  // per small board: X's cells, O's cells
    uint16_t big[2], closed;  // small boards won by X, by O; won or full
    int8_t nb, turn;  // board to play in (-1: any open one); 0 X to move, 1 O
    void init() { memset(this, 0, sizeof(*this)); nb = -1; }
    void play(int b, int c) {
        uint16_t mine = m[turn][b] |= 1 << c;
        if (WIN[mine]) big[turn] |= 1 << b, closed |= 1 << b;
        else if ((m[0][b] | m[1][b]) == 511) closed |= 1 << b;
        nb = (closed >> c & 1) ? -1 : c;
        turn ^= 1;
    }
    int status() const {  // -1 ongoing, 0 X won, 1 O won, 2 draw
        if (WIN[big[0]]) return 0;
        if (WIN[big[1]]) return 1;
        return closed == 511 ? 2 : -1;
    }
    int moves(uint8_t* out) const {  // move = board * 9 + cell
        int n = 0;
        for (int b = 0; b < 9; b++) {
            if (closed >> b & 1 || (nb >= 0 && b != nb)) continue;
            unsigned e = ~(m[0][b] | m[1][b]) & 511;
            while (e) out[n++] = b * 9 + __builtin_ctz(e), e &= e - 1;
        }
        return n;
    }
    double playout() {  // X's score of a uniformly random continuation
        for (;;) {
            int s = status();
            if (s >= 0) return s == 0 ? 1.0 : s == 1 ? 0.0 : 0.5;
            int b;
            unsigned e;
            if (nb >= 0) {
                b = nb, e = ~(m[0][b] | m[1][b]) & 511;
                play(b, kth_bit(e, xorshift() % __builtin_popcount(e)));
                continue;
            }
            int total = 0, cnt[9];
            for (b = 0; b < 9; b++) {
                cnt[b] = closed >> b & 1 ? 0 : __builtin_popcount(~(m[0][b] | m[1][b]) & 511);
                total += cnt[b];
            }
            int k = xorshift() % total;
            for (b = 0; k >= cnt[b]; b++) k -= cnt[b];
            e = ~(m[0][b] | m[1][b]) & 511;
            play(b, kth_bit(e, k));
        }
    }
};

struct Node {
    float w;  // score of the player who made this node's move
    int n, child;  // visits; first child (-1: none made)
    uint8_t move, nchild;
};
static const int MAX_NODES = 6000000;
static Node* pool;
static int used;
static const int TBL = 1 << 20;
static float SQRT_LN[TBL], INV_SQRT[TBL];

static int new_node(int move) {
    Node& x = pool[used];
    x.w = 0, x.n = 0, x.child = -1, x.move = move, x.nchild = 0;
    return used++;
}

static int search(const State& root_state, Clock::time_point deadline, long& sims) {
    used = 0;
    int root = new_node(255);
    int path[100], mover[100];
    uint8_t buf[81];
    sims = 0;
    for (;;) {
        if ((sims & 63) == 0 && Clock::now() >= deadline) break;
        State s = root_state;
        int len = 0, cur = root;
        path[len] = cur, mover[len++] = 1 - s.turn;
        while (pool[cur].child >= 0) {  // select: UCB1, unvisited children first
            Node& p = pool[cur];
            float sl = p.n < TBL ? SQRT_LN[p.n] : sqrtf(logf(p.n));
            int best = -1;
            float bv = -1;
            for (int i = 0; i < p.nchild; i++) {
                Node& c = pool[p.child + i];
                if (c.n == 0) { best = p.child + i; break; }
                float is = c.n < TBL ? INV_SQRT[c.n] : 1.0f / sqrtf(c.n);
                float v = c.w / c.n + 1.4f * sl * is;
                if (v > bv) bv = v, best = p.child + i;
            }
            cur = best;
            mover[len] = s.turn;
            s.play(pool[cur].move / 9, pool[cur].move % 9);
            path[len++] = cur;
        }
        // expand on the second visit: all children at once
        if (pool[cur].n >= 1 && s.status() < 0 && used + 81 < MAX_NODES) {
            int k = s.moves(buf);
            pool[cur].child = used, pool[cur].nchild = k;
            for (int i = 0; i < k; i++) new_node(buf[i]);
            cur = pool[cur].child + xorshift() % k;
            mover[len] = s.turn;
            s.play(pool[cur].move / 9, pool[cur].move % 9);
            path[len++] = cur;
        }
        double x = s.playout();
        for (int i = 0; i < len; i++) {
            pool[path[i]].n++;
            pool[path[i]].w += mover[i] == 0 ? x : 1.0 - x;
        }
        sims++;
    }
    Node& r = pool[root];
    int best = -1;
    for (int i = 0; i < r.nchild; i++)
        if (best < 0 || pool[r.child + i].n > pool[best].n) best = r.child + i;
    return best < 0 ? -1 : pool[best].move;
}

int main() {
    for (int m = 0; m < 512; m++)
        for (int l : LINES) WIN[m] |= (m & l) == l;
    for (int i = 1; i < TBL; i++) SQRT_LN[i] = sqrtf(logf(i)), INV_SQRT[i] = 1.0f / sqrtf(i);
    pool = new Node[MAX_NODES];
    rng_state = Clock::now().time_since_epoch().count() | 1;
    State st;
    st.init();
    bool first = true;
    int orow, ocol;
    while (scanf("%d %d", &orow, &ocol) == 2) {
        auto t0 = Clock::now();
        if (orow >= 0) st.play(orow / 3 * 3 + ocol / 3, orow % 3 * 3 + ocol % 3);
        int n;
        if (scanf("%d", &n) != 1) break;
        vector<int> valid(n);
        for (int i = 0; i < n; i++) {
            int r, c;
            if (scanf("%d %d", &r, &c) != 2) return 0;
            valid[i] = r * 9 + c;
        }
        auto deadline = t0 + chrono::milliseconds(first ? 900 : 85);
        long sims;
        int mv = search(st, deadline, sims);
        double secs = chrono::duration<double>(Clock::now() - t0).count();
        int row = -1, col = -1;
        if (mv >= 0) row = mv / 9 / 3 * 3 + mv % 9 / 3, col = mv / 9 % 3 * 3 + mv % 9 % 3;
        bool ok = false;
        for (int v : valid) ok |= v == row * 9 + col;
        if (!ok) {
            fprintf(stderr, "move %d %d not among the valid actions; playing the first\n", row, col);
            row = valid[0] / 9, col = valid[0] % 9;
        }
        fprintf(stderr, "%ld sims in %.1f ms, %.0f sims/s\n", sims, secs * 1e3, sims / secs);
        printf("%d %d\n", row, col);
        fflush(stdout);
        st.play(row / 3 * 3 + col / 3, row % 3 * 3 + col % 3);
        first = false;
    }
    return 0;
}
