# The operator image: kubecoord/operator:<version>  (make image; the release workflow
# builds it for linux/amd64 and linux/arm64).
#
# Runs `kubecoord operator` as an unprivileged user (65532, as the chart's
# podSecurityContext) on a read-only root filesystem: nothing is written at run time
# except to /tmp, which the chart mounts as an emptyDir. Bytecode is compiled at build
# time so that Python never tries to write __pycache__.

ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY operator ./operator
# The image installs the wheel it builds here (the artefact `make dist` checks and a
# release publishes), not the source tree. Only what the operator needs: the kubernetes
# and zookeeper backends and the operator extra (kopf, the kubernetes client,
# prometheus-client), with the project's pins.
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/kubecoord \
 && wheel="$(ls /wheels/kubecoord-*.whl)" \
 && /opt/kubecoord/bin/pip install --no-compile -c constraints.txt "kubecoord[kubernetes,zookeeper,operator] @ file://${wheel}" \
 && /opt/kubecoord/bin/python -m compileall -q /opt/kubecoord \
 && /opt/kubecoord/bin/kubecoord --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kubecoord operator" \
      org.opencontainers.image.description="kopf operator for the kubecoord.dev LeaderElection, Group and KVStore CRDs" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/kubecoord /opt/kubecoord
ENV PATH=/opt/kubecoord/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 65532:65532
# /healthz (every replica) and /metrics (Prometheus).
EXPOSE 8080 9090
ENTRYPOINT ["kubecoord"]
CMD ["operator", "--all-namespaces"]
