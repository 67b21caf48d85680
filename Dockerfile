# The acsledger image: a static binary on distroless, run as a non-root
# user. Build with `docker build -t acsledger .`; docker-compose.yml uses it.
#
# The build stage needs no C toolchain: the embedded store is modernc's
# pure-Go SQLite, so CGO_ENABLED=0 links a fully static binary that runs
# on an image with no libc.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/acsledger ./cmd/acsledger && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/acsverify ./cmd/acsverify && \
    mkdir -p /out/data /out/keys

# distroless/static has CA certificates, tzdata and a passwd entry for
# nonroot (65532), and no shell: nothing to exec into but acsledger.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/acsledger /out/acsverify /
# The embedded store (./acsledger-data under /data) and the keys are
# written on first start, so both directories belong to the user that
# runs the service; a fresh named volume mounted on them inherits that.
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build --chown=65532:65532 /out/keys /keys
USER 65532:65532
WORKDIR /data
VOLUME ["/data", "/keys"]
EXPOSE 8080
ENTRYPOINT ["/acsledger"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--keys", "/keys"]
