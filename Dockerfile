# Quire: `quire standalone` (bookie + broker + compactor) with Java for PySpark.
FROM python:3.11-slim-bookworm

# With several brokers, set QUIRE_ADVERTISED_ADDRESS to the host:port other containers and
# clients reach this one by (default: the container's host name and QUIRE_PORT).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    QUIRE_HOST=0.0.0.0 \
    QUIRE_DATA_DIR=/var/lib/quire

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
 && rm -rf /var/lib/apt/lists/*

ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64

WORKDIR /opt/quire
COPY pyproject.toml README.md ./
COPY app ./app
COPY bookie ./bookie
COPY managed_ledger ./managed_ledger
COPY topics ./topics
COPY compactor ./compactor
COPY common ./common
COPY migrations ./migrations
# the generated client: `quire admin` is built on it
COPY clients/python ./clients/python
RUN pip install . ./clients/python && useradd --system --create-home quire && mkdir -p /var/lib/quire \
 && chown quire /var/lib/quire

USER quire
ENV PYSPARK_PYTHON=/usr/local/bin/python
VOLUME ["/var/lib/quire"]
EXPOSE 8080 3181 9092
ENTRYPOINT ["tini", "--", "quire"]
CMD ["standalone"]
