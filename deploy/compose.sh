# Sourced by up.sh and down.sh: compose runs `docker compose` (v2) when present, else
# docker-compose (v1.29), on deploy/compose.yaml in project $RINGKV_PROJECT (default ringkv).
deploy=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
project=${RINGKV_PROJECT:-ringkv}
compose() {
  if docker compose version >/dev/null 2>&1; then
    docker compose -p "$project" -f "$deploy/compose.yaml" "$@"
  else
    docker-compose -p "$project" -f "$deploy/compose.yaml" "$@"
  fi
}
