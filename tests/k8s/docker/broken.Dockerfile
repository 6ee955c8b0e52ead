# A Dockerfile that dockerfile-utils must reject (tests/k8s/dockerfile.test.mjs): a misspelt instruction
# and an invalid port protocol.
ARG BASE=debian:bookworm-slim
FRM ${BASE}
EXPOSE 9000/tcpp
ENTRYPOINT ["zps"]
