# kerneld container images (docs/deploy.md "Docker").
#
#   docker build -t kerneld:cuda .                 # default: CUDA runtime image (stage cuda)
#   docker build -t kerneld:cpu --target cpu .     # CPU only, debian:bookworm-slim
#   docker run --rm --gpus all -p 50051:50051 -p 9400:9400 kerneld:cuda
#
# Every RUN step calls a project script that CI runs too (scripts/check_deploy
# checks that): scripts/bootstrap (install what is missing), scripts/build
# (configure and build, CUDA whenever nvcc is present: the same tree CI
# builds), scripts/package_check --install-from build --keep DIR (install the
# relocatable package, smoke-test it, keep it; the ctest package_check runs
# exactly that). The runtime stages only copy the package in: no RUN.
#
# The CPU stages come first so that `--target cpu` never needs the CUDA images.

# ---------------------------------------------------------------- cpu (build)
FROM debian:bookworm-slim AS cpu-build
WORKDIR /src
# The dependencies first: a layer that only changes with scripts/bootstrap.
COPY scripts/bootstrap scripts/bootstrap
RUN scripts/bootstrap
COPY . .
RUN scripts/build && scripts/package_check --install-from build --keep /opt/kerneld

# ---------------------------------------------------------------- cpu (runtime)
FROM debian:bookworm-slim AS cpu
LABEL org.opencontainers.image.title="kerneld (CPU)" \
      org.opencontainers.image.description="kerneld: kernels behind gRPC, CPU backend" \
      org.opencontainers.image.licenses="Apache-2.0"
# The relocatable package: bin/ and its libraries (gRPC, protobuf, abseil,
# prometheus-cpp, libstdc++, ...) in lib/; glibc comes from the base image.
COPY --from=cpu-build /opt/kerneld/bin /opt/kerneld/bin
COPY --from=cpu-build /opt/kerneld/lib /opt/kerneld/lib
ENV PATH=/opt/kerneld/bin:$PATH
# No user of that id exists in the image: none is needed (no home, no login).
USER 65532:65532
EXPOSE 50051 9400
# kernelctl health on the address the running kerneld listens on, read from
# its command line: it follows the flags given at `docker run` (a unix
# socket, another port) instead of assuming 127.0.0.1:50051.
COPY deploy/docker/kerneld-healthcheck /opt/kerneld/bin/kerneld-healthcheck
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["kerneld-healthcheck"]
ENTRYPOINT ["kerneld"]
CMD ["--listen=0.0.0.0:50051", "--allow_insecure_remote", "--metrics_listen=0.0.0.0:9400"]

# ---------------------------------------------------------------- cuda (build)
FROM nvidia/cuda:13.0.1-devel-ubuntu24.04 AS build
WORKDIR /src
COPY scripts/bootstrap scripts/bootstrap
RUN scripts/bootstrap
COPY . .
# nvcc is on PATH here, so scripts/build compiles the CUDA backend
# (KERNELD_CUDA=AUTO; sm_80, sm_90, sm_100 + PTX).
RUN scripts/build && scripts/package_check --install-from build --keep /opt/kerneld

# ---------------------------------------------------------------- cuda (runtime, default)
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04 AS cuda
LABEL org.opencontainers.image.title="kerneld" \
      org.opencontainers.image.description="kerneld: CUDA kernels behind gRPC" \
      org.opencontainers.image.licenses="Apache-2.0"
# The CUDA runtime image carries the toolkit's runtime libraries that the
# package leaves to the system: libcublas, libcublasLt and libnvrtc (the JIT
# backend); the CUDA runtime itself is linked statically. The driver
# (libcuda.so.1) comes from the host through the NVIDIA container toolkit
# (--gpus, or the device plugin on Kubernetes).
COPY --from=build /opt/kerneld/bin /opt/kerneld/bin
COPY --from=build /opt/kerneld/lib /opt/kerneld/lib
# NVRTC compiles the kernels' own headers, which include cuda_runtime.h,
# cuda_fp16.h, cuda_bf16.h, cooperative_groups.h and libcu++ (include/cccl):
# the toolkit's include directory, which the runtime image lacks (it comes
# with the development files). The JIT looks for it beside libnvrtc
# (/usr/local/cuda/include), so the same toolkit's headers come from the
# build stage (docs/jit.md, "Finding NVRTC and the toolkit headers").
COPY --from=build /usr/local/cuda/include /usr/local/cuda/include
# A warmed JIT cache for the image's target GPUs: `kerneld
# --jit_precompile_arch=sm_90 --jit_precompile_sms=132 --jit_warm=FILE
# --jit_cache_dir=DIR` compiles a warm list without a GPU (docs/jit.md,
# "Warming an image"); a DIR made in the build stage is copied here with
# --chown=65532:65532 (the cache refuses a directory of another user, its
# files become code on the GPU) and named with --jit_cache_dir at run time.
ENV PATH=/opt/kerneld/bin:$PATH \
    LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 65532:65532
EXPOSE 50051 9400
COPY deploy/docker/kerneld-healthcheck /opt/kerneld/bin/kerneld-healthcheck
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["kerneld-healthcheck"]
ENTRYPOINT ["kerneld"]
CMD ["--listen=0.0.0.0:50051", "--allow_insecure_remote", "--metrics_listen=0.0.0.0:9400"]
