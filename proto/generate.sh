#!/usr/bin/env bash
# Regenerates proto/kvpb/*.pb.go. Needs protoc (Debian: protobuf-compiler) and the Go plugins:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# The generated code is committed; a build never runs this.
set -euo pipefail
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  kvpb/kv.proto kvpb/admin.proto kvpb/cluster.proto kvpb/errors.proto
