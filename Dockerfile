# Builds every binary of the service (logic, job, comet and the all-in-one
# danmaku) into one small image; docker-compose.yml picks the command per
# service. Configuration comes from DANMAKU_* environment variables; the
# files of configs/ are in /etc/danmaku for -config.
#
#   docker build -t danmaku .
#   docker run --rm -p 8090:8090 danmaku        # all-in-one demo on :8090

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a code change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ \
        ./cmd/logic ./cmd/job ./cmd/comet ./cmd/archive ./cmd/danmaku ./cmd/healthcheck

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
COPY configs/ /etc/danmaku/
USER nonroot:nonroot
# 8090 logic / all-in-one, 8080 comet public, 8081 comet internal, 8082 job metrics, 8083 archive metrics
EXPOSE 8090 8080 8081 8082 8083
# The all-in-one binds loopback by default; in a container it must listen
# on the container's interface for -p to reach it.
CMD ["/usr/local/bin/danmaku", "-logic.listen=:8090"]
