# owed: a multi-stage build. cgo is on because the embedded default database is SQLite
# (mattn/go-sqlite3); the final image runs as a non-root user with its data in a volume.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X github.com/owed/owed/app.Version=${VERSION}" -o /out/owed ./cmd/owed

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/owed --shell /usr/sbin/nologin owed \
 && mkdir -p /var/lib/owed && chown owed:owed /var/lib/owed
COPY --from=build /out/owed /usr/local/bin/owed
USER owed
ENV OWED_ADDR=0.0.0.0:8080 \
    OWED_DATA_DIR=/var/lib/owed
VOLUME ["/var/lib/owed"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["/usr/local/bin/owed", "health"]
ENTRYPOINT ["/usr/local/bin/owed"]
CMD ["serve"]
