#!/usr/bin/env bash
# Installs a Trino 476 server for the Presto client's tests (tests/presto) and benchmark, outside the
# work tree: io.trino:trino-server:476 (tar.gz, ~783 MiB, the last Trino server tarball on Maven
# Central) is downloaded from Maven Central, checked against Maven Central's SHA-1, and unpacked into
#   ${JUMPGATE_TRINO_CACHE:-/var/cache/jumpgate/trino/476}/trino-server-476
# Idempotent: when that folder is complete (a stamp file written after a verified unpack), it does
# nothing. The tarball itself is removed after unpacking (JUMPGATE_TRINO_KEEP_TARBALL=1 keeps it).
#
# Trino 476 needs Java 24 or later. This machine's kind has Temurin 25 at
# /usr/lib/jvm/temurin-25-jdk-amd64 (JUMPGATE_TRINO_JAVA_HOME overrides). When it is missing, install
# a JDK 24+ from Debian's packages where one exists (apt-cache search openjdk-25) or point
# JUMPGATE_TRINO_JAVA_HOME at one; until then this script fails and the Trino tests say they were
# skipped and why.
#
# The Maven Central URL: JUMPGATE_MAVEN_CENTRAL, else a <mirror> of "central"/"*" in
# ~/.m2/settings.xml, else https://repo.maven.apache.org/maven2.
set -euo pipefail

VERSION=476
CACHE=${JUMPGATE_TRINO_CACHE:-/var/cache/jumpgate/trino/$VERSION}
JAVA_HOME_TRINO=${JUMPGATE_TRINO_JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
HOME_DIR=$CACHE/trino-server-$VERSION
STAMP=$CACHE/.installed

if [ ! -x "$JAVA_HOME_TRINO/bin/java" ]; then
  echo "trino-install: no Java 24+ at $JAVA_HOME_TRINO (Trino $VERSION needs one): install Temurin 25" \
       "or set JUMPGATE_TRINO_JAVA_HOME to a JDK 24+" >&2
  exit 1
fi
java_major=$("$JAVA_HOME_TRINO/bin/java" -XshowSettings:properties -version 2>&1 \
  | sed -n 's/^ *java.specification.version = //p')
if [ "${java_major:-0}" -lt 24 ] 2>/dev/null; then
  echo "trino-install: $JAVA_HOME_TRINO is Java $java_major; Trino $VERSION needs 24+" >&2
  exit 1
fi

if [ -f "$STAMP" ] && [ -x "$HOME_DIR/bin/launcher" ] && [ -d "$HOME_DIR/plugin/tpch" ]; then
  echo "trino-install: Trino $VERSION present ($HOME_DIR)"
  exit 0
fi

central=${JUMPGATE_MAVEN_CENTRAL:-}
if [ -z "$central" ] && [ -f "$HOME/.m2/settings.xml" ]; then
  # The first <url> of a mirror whose mirrorOf is central or *, if any.
  central=$(python3 - "$HOME/.m2/settings.xml" <<'EOF' || true
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = {"m": root.tag[1:].split("}")[0]} if root.tag.startswith("{") else {}
p = "m:" if ns else ""
for m in root.iterfind(f".//{p}mirrors/{p}mirror", ns):
    of = (m.findtext(f"{p}mirrorOf", "", ns) or "").split(",")
    if any(x.strip() in ("central", "*") for x in of):
        print((m.findtext(f"{p}url", "", ns) or "").strip().rstrip("/")); break
EOF
)
fi
central=${central:-https://repo.maven.apache.org/maven2}

url=$central/io/trino/trino-server/$VERSION/trino-server-$VERSION.tar.gz
mkdir -p "$CACHE"
tarball=$CACHE/trino-server-$VERSION.tar.gz
want=$(curl -fsSL --retry 3 "$url.sha1" | cut -c1-40)
if [ ${#want} -ne 40 ]; then echo "trino-install: no SHA-1 at $url.sha1" >&2; exit 1; fi
have=""
[ -f "$tarball" ] && have=$(sha1sum "$tarball" | cut -c1-40)
if [ "$have" != "$want" ]; then
  echo "trino-install: downloading $url (~783 MiB)"
  curl -fSL --retry 3 -C - -o "$tarball.part" "$url" || curl -fSL --retry 3 -o "$tarball.part" "$url"
  have=$(sha1sum "$tarball.part" | cut -c1-40)
  if [ "$have" != "$want" ]; then
    rm -f "$tarball.part"
    echo "trino-install: SHA-1 mismatch for $url (got $have, want $want)" >&2
    exit 1
  fi
  mv "$tarball.part" "$tarball"
fi

echo "trino-install: unpacking into $CACHE"
rm -rf "$HOME_DIR" "$STAMP"
tar -xzf "$tarball" -C "$CACHE"
if [ ! -x "$HOME_DIR/bin/launcher" ] || [ ! -f "$HOME_DIR/lib/io.trino_trino-main-$VERSION.jar" ] \
   || [ ! -d "$HOME_DIR/plugin/tpch" ]; then
  echo "trino-install: $HOME_DIR is incomplete after unpacking" >&2
  exit 1
fi
[ "${JUMPGATE_TRINO_KEEP_TARBALL:-0}" = "1" ] || rm -f "$tarball"
echo "$want  trino-server-$VERSION.tar.gz" > "$STAMP"
echo "trino-install: Trino $VERSION installed ($HOME_DIR; Java $JAVA_HOME_TRINO)"
