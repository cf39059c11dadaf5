#!/usr/bin/env bash
# Installs what building and testing pg_wf needs, and only what is missing.
# The server headers are pinned to the installed server's version: a plain
# install would upgrade the server and libpq too (see shared BUILDING.md).
set -euo pipefail

need=()
server_version=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
if [ -z "$server_version" ]; then
    need+=(postgresql-15 postgresql-client-15)
fi
has() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if ! has postgresql-server-dev-15; then
    if [ -n "$server_version" ]; then need+=("postgresql-server-dev-15=$server_version")
    else need+=(postgresql-server-dev-15); fi
fi
for pkg in nlohmann-json3-dev libgtest-dev libipc-run-perl python3-psycopg pgbouncer g++ make \
           python3-pytest chromium; do
    has "$pkg" || need+=("$pkg")
done
# The TypeScript library's tests: any Node.js 18 or later (Debian's, unless
# one is installed already).
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -eq 0 ]; then
    echo "install-deps: everything present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root (or with sudo) to install them" >&2
    exit 1
fi
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
