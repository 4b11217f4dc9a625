# karpy container image: one image, two entry points (`karpy controller`, `karpy webhook`), each
# serving its Flask app under gunicorn in-process (extender/cli/controller.py, webhook/server.py).
# Build: `make image` (hack/image.py: docker, podman or buildah, whichever the machine has), or
#   docker build -t karpy:latest .
# BASE: any Debian bookworm image with python3 3.11 and python3-venv. The default is the registry's
# python:3.11-slim-bookworm; where no registry can be reached, hack/image.py makes one with
# debootstrap (bookworm minbase + python3) and passes it as --build-arg BASE=localhost/karpy-base:<hash>.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The "ca" secret (optional): a CA bundle pip trusts, for builds behind a TLS-inspecting proxy
# (hack/image.py passes the host's); never stored in a layer.
# Dependencies first, from pyproject.toml alone, so a source change reuses this layer.
COPY pyproject.toml ./
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && python3 -m venv /opt/karpy \
 && /opt/karpy/bin/pip install --upgrade pip setuptools \
 && /opt/karpy/bin/pip install $(python3 -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
COPY README.md ./
COPY extender ./extender
COPY webhook ./webhook
# pip and setuptools are not needed at run time.
RUN /opt/karpy/bin/pip install --no-deps --no-build-isolation . \
 && /opt/karpy/bin/pip uninstall -y -q pip setuptools

FROM ${BASE}
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
