#!/usr/bin/env bash
# Removes the compose cluster of deploy/up.sh: containers (n4 and prometheus too), network and
# volumes.
# The certificates in deploy/certs/ stay; delete them by hand to start over.
set -euo pipefail
source "$(dirname "$0")/compose.sh"
export RINGKV_CERTS=${RINGKV_CERTS:-$deploy/certs}
compose --profile spare --profile monitoring down --volumes --remove-orphans --timeout 30
