# meshplan: one image for the api, worker, beat and migration services (docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY optimizer ./optimizer
COPY service ./service
COPY store ./store
COPY api ./api
COPY workers ./workers
COPY migrations ./migrations
COPY benchmarks ./benchmarks
COPY accuracy ./accuracy
# editable: the migrations and alembic.ini stay beside the code (store.migrate finds them there)
RUN pip install --no-cache-dir -e . && useradd --create-home meshplan
USER meshplan
EXPOSE 8000
CMD ["meshplan", "serve", "--host", "0.0.0.0", "--port", "8000", "--no-migrate"]
