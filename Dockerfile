# gql_memory server image. With DATABASE_URL it uses that PostgreSQL (pgvector required);
# without, it runs the embedded PostgreSQL with its data in /var/lib/gql-memory (a volume).
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY gql_memory gql_memory
COPY migrations migrations
RUN pip install --no-cache-dir . && rm -rf /app/*

ENV GQL_MEMORY_HOST=0.0.0.0 \
    GQL_MEMORY_PORT=8000
VOLUME ["/var/lib/gql-memory"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["gql-memory", "serve"]
