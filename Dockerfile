# push-worker container image: build with the Swift toolchain on Debian bookworm, run on
# bookworm-slim with only the C libraries the binary loads (checked by
# scripts/check-runtime-deps.sh in CI) plus the Swift runtime libraries copied from the builder.
FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka-dev libhiredis-dev libcurl4-openssl-dev libnghttp2-dev libssl-dev libjemalloc-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies are built at exactly the versions and commits pinned in Package.resolved;
# the build fails rather than re-resolve. Package.resolved is not in git (development
# machines resolve against a local mirror whose commit ids differ from upstream's): the
# release pipeline runs `swift package resolve` in a clean checkout of the release commit
# against the upstream repositories, keeps the resulting Package.resolved with the
# release's artifacts, and puts it in the build context next to Package.swift.
COPY Package.swift Package.resolved* ./
RUN test -f Package.resolved \
 || { echo "Package.resolved is missing from the build context (see the comment above)" >&2; exit 1; }
RUN swift package resolve --force-resolved-versions
COPY VERSION ./
COPY Sources Sources
COPY Plugins Plugins
COPY Tests Tests
# The build context has no .git: the revision comes in as a build argument (README: production quick start), and
# the version given for the image's label must be the VERSION file's.
ARG PUSH_VERSION
ARG PUSH_BUILD_REVISION=unknown
RUN test "$PUSH_VERSION" = "$(cat VERSION)" \
 || { echo "--build-arg PUSH_VERSION=$(cat VERSION) is required (VERSION), not '$PUSH_VERSION'" >&2; exit 1; }
# Only the production executable: push-worker-dev (demo, bench, sandboxes, Kafka mock) is neither built nor shipped.
RUN PUSH_BUILD_REVISION="$PUSH_BUILD_REVISION" swift build -c release --force-resolved-versions --product push-worker \
 && install -m 0755 .build/release/push-worker /push-worker \
 && mkdir /swift-runtime \
 && ldd /push-worker | awk '$3 ~ /\/swift\/linux\// {print $3}' | xargs -r cp -t /swift-runtime/

FROM debian:bookworm-slim
ARG PUSH_VERSION
ARG PUSH_BUILD_REVISION=unknown
LABEL org.opencontainers.image.title="push-worker" \
      org.opencontainers.image.version="$PUSH_VERSION" \
      org.opencontainers.image.revision="$PUSH_BUILD_REVISION" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka1 libcurl4 libnghttp2-14 libhiredis0.14 libssl3 libjemalloc2 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin push
COPY --from=build /swift-runtime/ /usr/lib/swift/linux/
RUN echo /usr/lib/swift/linux > /etc/ld.so.conf.d/swift.conf && ldconfig
COPY --from=build /push-worker /usr/local/bin/push-worker
USER 10001:10001
EXPOSE 9090
ENTRYPOINT ["push-worker"]
CMD ["run"]
