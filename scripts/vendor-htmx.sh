#!/usr/bin/env bash
# The console's htmx is shipped in the repository (app/console/static/), so an install needs
# neither Node.js nor the network for it. This script is how that file was taken, and how to take
# it again when the version changes: `npm pack` the pinned version from the npm registry and
# check the file's sha256 against the one recorded here (change both together).
set -euo pipefail
VERSION=2.0.11
SHA256=d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "htmx.org@$VERSION" >/dev/null && tar xzf "htmx.org-$VERSION.tgz")
echo "$SHA256  $work/package/dist/htmx.min.js" | sha256sum --check --quiet
cp "$work/package/dist/htmx.min.js" "app/console/static/htmx-$VERSION.min.js"
echo "app/console/static/htmx-$VERSION.min.js: htmx.org $VERSION (0BSD), sha256 $SHA256"
