#!/usr/bin/env bash
# vdr's optional system tools: `make test` and `make demo` call this before anything else.
#
#   scripts/sysdeps.sh install   (make test)  On Debian/Ubuntu, as root or with sudo that needs no password,
#                                apt-get installs the missing packages, as CI (root on Debian) always did; a
#                                failing apt-get fails. Elsewhere (macOS, another distribution, no root, sudo
#                                asking for a password) nothing is installed.
#   scripts/sysdeps.sh try       (make demo)  The same, but a failing apt-get is only reported.
#   scripts/sysdeps.sh check     Install nothing.
#
# Then every tool still missing is named once, with what it disables, and the script exits 0: vdr, its demo
# and the tests run without them (the tests that need one skip, naming it).
set -u
mode="${1:-check}"

# Debian packages: poppler-utils (the poppler rasterizer), tesseract-ocr (OCR of pages without text;
# tesseract-ocr-osd: orientation detection of sideways scans before OCR), chromium (headless test of the
# HTML report: tests/test_report_browser.py).
APT_PACKAGES="poppler-utils tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd chromium"

apt_missing() {
    local p out=""
    for p in $APT_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out="$out $p"
    done
    echo "$out"
}

install_debian() {
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1 || return 0
    local missing sudo=""
    missing="$(apt_missing)"
    [ -n "$missing" ] || return 0
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo"
        else
            echo "not installing Debian packages:$missing (not root, and sudo needs a password or is absent)"
            return 0
        fi
    fi
    echo "installing Debian packages:$missing"
    # shellcheck disable=SC2086
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
}

case "$mode" in
    install) install_debian || exit $? ;;
    try) install_debian || echo "apt-get failed: going on without the packages it could not install" ;;
    check) ;;
    *) echo "usage: $0 install|try|check" >&2; exit 2 ;;
esac

have() { command -v "$1" >/dev/null 2>&1; }
osd_installed() {
    have tesseract && tesseract --list-langs 2>/dev/null | grep -qx osd
}
java_21() {
    local v
    have java || return 1
    v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)"
    [ -n "$v" ] && [ "$v" -ge 21 ]
}

lines=()
have pdftoppm && have pdftotext || lines+=(
    "poppler (pdftoppm, pdftotext): vdr ingest --rasterizer poppler; the default, pdfium, needs none"
    "    install: Debian poppler-utils; macOS brew install poppler")
if have tesseract; then
    osd_installed || lines+=(
        "tesseract's osd.traineddata: orientation detection of sideways scans before OCR"
        "    install: Debian tesseract-ocr-osd")
else
    lines+=(
        "tesseract: OCR of scanned pages in vdr ingest (they keep what their text layer holds)"
        "    install: Debian tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd; macOS brew install tesseract")
fi
have chromium || have chromium-browser || lines+=(
    "chromium: only the headless-browser test of the HTML report (tests/test_report_browser.py)"
    "    install: Debian chromium")
java_21 || lines+=(
    "Java 21+: the optional pyserini backend ('.[pyserini]') and the live Pyserini/Lucene tests"
    "    install: a JDK 21 (JAVA_HOME, or under /usr/lib/jvm)")

if [ "${#lines[@]}" -gt 0 ]; then
    echo "optional system tools missing (vdr runs without them; the tests that need one skip, naming it):"
    for l in "${lines[@]}"; do echo "  $l"; done
fi
exit 0
