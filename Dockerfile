# zps: one image for every role. The role comes from DMLC_ROLE; worker programs are arguments:
#   docker run -e DMLC_ROLE=scheduler ... zps:0.1.0
#   docker run -e DMLC_ROLE=worker    ... zps:0.1.0 check --rounds 20
# See docs/deployment.md and k8s/README.md.
#
# CPU image (Debian 12):
#   docker build -t zps:0.1.0 .
# CUDA image: the build stage needs nvcc (a -devel image), the runtime stage a -runtime image of the
# same CUDA and distribution version:
#   docker build -t zps:0.1.0-cuda \
#     --build-arg BUILD_BASE=nvidia/cuda:12.6.3-devel-ubuntu24.04 \
#     --build-arg BASE=nvidia/cuda:12.6.3-runtime-ubuntu24.04 .
# The runtime stage installs exactly the packages that own the libraries the binary links, as found in
# the build stage (dpkg -S), so the same file works on Debian and Ubuntu bases.
ARG BASE=debian:bookworm-slim
ARG BUILD_BASE=${BASE}

FROM ${BUILD_BASE} AS build
ARG ZPS_WITH_CUDA=AUTO
ARG BUILD_TYPE=Release
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# Build dependencies first, so this layer is cached until the list changes.
COPY tools/install-deps.sh tools/install-deps.sh
RUN ZPS_DEPS_BUILD_ONLY=1 tools/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DZPS_BUILD_TESTS=OFF \
        -DZPS_WITH_CUDA=${ZPS_WITH_CUDA} \
    && cmake --build /build --target zps -j "$(nproc)" \
    && install -D -m 0755 /build/bin/zps /out/zps \
    && strip --strip-unneeded /out/zps \
    && /out/zps version
# The Debian/Ubuntu packages that own the shared libraries zps links (libzmq5, libprotobuf32,
# libgflags2.2, libgoogle-glog0v6, libopenblas0-pthread, libsodium23, libcpp-httplib0.11 and what they
# need on Debian 12).
RUN set -e; \
    for lib in $(ldd /out/zps | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do \
      real=$(readlink -f "$lib"); pkg=""; \
      for p in "$real" "/usr$real" "${real#/usr}" "$lib"; do \
        pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$pkg" ] && break; \
      done; \
      [ -n "$pkg" ] || { echo "no package owns $lib" >&2; exit 1; }; \
      echo "$pkg"; \
    done | sort -u > /out/runtime-packages; \
    echo "runtime packages:" $(cat /out/runtime-packages)

FROM ${BASE}
LABEL org.opencontainers.image.title="zps" \
      org.opencontainers.image.description="zps parameter-server runtime: scheduler, server and worker in one image"
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update \
    && apt-get install -y --no-install-recommends $(cat /tmp/runtime-packages) \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
    && useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin zps
COPY --from=build /out/zps /usr/local/bin/zps
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
ENTRYPOINT ["zps"]
