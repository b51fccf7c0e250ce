#!/usr/bin/env bash
# Re-vendors GraphiQL's browser bundles into vendor/ from the npm registry (see VERSIONS.md).
# Needs node and npm; run it from anywhere, then update VERSIONS.md and the versions in
# index.html. `npm pack` checks each tarball against the registry's integrity hash.
set -euo pipefail

GRAPHIQL=3.8.3          # the version strawberry's own page loads from a CDN
REACT=18.2.0            # graphiql 3 runs on React 18
EXPLORER=1.0.2          # @graphiql/plugin-explorer, the Explorer sidebar
GRAPHIQL_EXPLORER=0.9.0 # graphiql-explorer, bundled inside the plugin (its licence only)
ESBUILD=0.28.2          # minifies graphiql.min.js, which the package ships unminified

here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

unpack() { # unpack <package@version> <dir>
    local tarball
    tarball="$(npm pack --silent "$1")"
    mkdir -p "$2"
    tar -xzf "$tarball" -C "$2" --strip-components=1
}
unpack "graphiql@$GRAPHIQL" graphiql
unpack "react@$REACT" react
unpack "react-dom@$REACT" react-dom
unpack "@graphiql/plugin-explorer@$EXPLORER" explorer
unpack "graphiql-explorer@$GRAPHIQL_EXPLORER" graphiql-explorer
npm install --silent --no-save --prefix tools "esbuild@$ESBUILD"
esbuild="tools/node_modules/.bin/esbuild"

out="$here/vendor"
rm -rf "$out"
mkdir -p "$out/react-$REACT" "$out/react-dom-$REACT" "$out/graphiql-$GRAPHIQL" \
    "$out/graphiql-plugin-explorer-$EXPLORER"

cp react/umd/react.production.min.js react/LICENSE "$out/react-$REACT/"
cp react-dom/umd/react-dom.production.min.js react-dom/LICENSE "$out/react-dom-$REACT/"

# No source maps; licence comments stay, gathered at the end of each file.
"$esbuild" graphiql/graphiql.min.js --minify --legal-comments=eof --log-level=error \
    --outfile="$out/graphiql-$GRAPHIQL/graphiql.min.js"
"$esbuild" graphiql/graphiql.min.css --minify --legal-comments=none --log-level=error \
    --outfile="$out/graphiql-$GRAPHIQL/graphiql.min.css"
cp graphiql/LICENSE "$out/graphiql-$GRAPHIQL/"

# The plugin's tarball has no LICENSE file: it is MIT like the graphiql monorepo it comes
# from; the graphiql-explorer code bundled inside it is MIT too.
cp explorer/dist/index.umd.js explorer/dist/style.css "$out/graphiql-plugin-explorer-$EXPLORER/"
cp graphiql/LICENSE "$out/graphiql-plugin-explorer-$EXPLORER/LICENSE"
cp graphiql-explorer/LICENSE "$out/graphiql-plugin-explorer-$EXPLORER/LICENSE.graphiql-explorer"

cd "$out" && find . -type f -printf '%9s  %p\n' | sort -k2
