# The noughts server. Build: docker compose build; run: docker compose up.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY engine ./engine
COPY server ./server
COPY client ./client
RUN pip install --no-cache-dir . \
    && useradd --create-home noughts \
    && mkdir -p /data && chown noughts /data
USER noughts
ENV NOUGHTS_DB=/data/noughts.db \
    NUMBA_CACHE_DIR=/home/noughts/.numba-cache
EXPOSE 8765
CMD ["noughts", "serve", "--host", "0.0.0.0", "--port", "8765", "--db", "/data/noughts.db"]
