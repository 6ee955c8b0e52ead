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
# PyTorch image (CPU, Debian base only): workers can run PyTorch scripts through zps.torch; it adds
# Debian's python3-torch, the examples in /usr/share/zps/examples/torch and the digits data
# (ZPS_DATA_DIR=/usr/share/zps/data), about 700 MB more (k8s/overlays/torch runs it):
#   docker build -t zps:0.1.0-torch --build-arg WITH_TORCH=1 .
# Every image holds the zps Python package (import zps.torch) for Debian's python3.
# The runtime stage installs exactly the packages that own the libraries the binary links, as found in
# the build stage (dpkg -S), so the same file works on Debian and Ubuntu bases.
ARG BASE=debian:bookworm-slim
ARG BUILD_BASE=${BASE}

FROM ${BUILD_BASE} AS build
ARG ZPS_WITH_CUDA=AUTO
ARG BUILD_TYPE=Release
ARG WITH_TORCH=0
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# Build dependencies first, so this layer is cached until the list changes.
COPY tools/install-deps.sh tools/install-deps.sh
RUN ZPS_DEPS_BUILD_ONLY=1 tools/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DZPS_BUILD_TESTS=OFF \
        -DZPS_WITH_CUDA=${ZPS_WITH_CUDA} \
    && cmake --build /build --target zps zps_python -j "$(nproc)" \
    && install -D -m 0755 /build/bin/zps /out/zps \
    && strip --strip-unneeded /out/zps \
    && /out/zps version \
    && mkdir -p /out/python /out/data \
    && cp -r /build/python/zps /out/python/zps \
    && strip --strip-unneeded /out/python/zps/*.so
# The digits data for examples/torch/train_digits.py (from Debian's python3-sklearn package).
RUN if [ "$WITH_TORCH" = 1 ]; then tools/fetch-datasets.sh /out/data && rm -rf /var/lib/apt/lists/*; fi
# The Debian/Ubuntu packages that own the shared libraries zps links (libzmq5, libprotobuf32,
# libgflags2.2, libgoogle-glog0v6, libopenblas0-pthread, libsodium23, libcpp-httplib0.11 and what they
# need on Debian 12).
RUN set -e; \
    for lib in $(ldd /out/zps /out/python/zps/*.so | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do \
      real=$(readlink -f "$lib"); pkg=""; \
      for p in "$real" "/usr$real" "${real#/usr}" "$lib"; do \
        pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$pkg" ] && break; \
      done; \
      [ -n "$pkg" ] || { echo "no package owns $lib" >&2; exit 1; }; \
      echo "$pkg"; \
    done | sort -u > /out/runtime-packages; \
    echo "runtime packages:" $(cat /out/runtime-packages)

FROM ${BASE}
ARG WITH_TORCH=0
LABEL org.opencontainers.image.title="zps" \
      org.opencontainers.image.description="zps parameter-server runtime: scheduler, server and worker in one image"
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update \
    && apt-get install -y --no-install-recommends $(cat /tmp/runtime-packages) \
        $(if [ "$WITH_TORCH" = 1 ]; then echo python3 python3-numpy python3-torch; fi) \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
    && useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin zps
COPY --from=build /out/zps /usr/local/bin/zps
# Where Debian's and Ubuntu's python3 look, whatever their version.
COPY --from=build /out/python/ /usr/lib/python3/dist-packages/
COPY --from=build /out/data/ /usr/share/zps/data/
COPY examples/torch/ /usr/share/zps/examples/torch/
ENV ZPS_DATA_DIR=/usr/share/zps/data
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
ENTRYPOINT ["zps"]
