# karpy container image: one image, two entry points (`karpy controller`, `karpy webhook`), each
# serving its Flask app under gunicorn in-process (extender/cli/controller.py, webhook/server.py).
# Build: docker build -t karpy:latest .   (not built in karpy's CI: no container engine there)

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY extender ./extender
COPY webhook ./webhook
RUN python -m venv /opt/karpy \
 && /opt/karpy/bin/pip install --upgrade pip \
 && /opt/karpy/bin/pip install .

FROM python:3.11-slim-bookworm
# HOME=/tmp: the only writable path in karpy's pods (an emptyDir under readOnlyRootFilesystem);
# gunicorn puts its control socket under $HOME.
ENV PATH=/opt/karpy/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/karpy /opt/karpy
# Numeric non-root user (matches runAsUser in manifests/ and the chart), no shell, no home directory.
RUN groupadd --system --gid 65532 karpy \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin karpy
USER 65532:65532
# extender 8088, metrics 8089 (controller); admission 8443 (webhook).
EXPOSE 8088 8089 8443
ENTRYPOINT ["karpy"]
CMD ["controller"]
