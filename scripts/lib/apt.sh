# Shared by the cross-build test scripts: install Debian packages when missing
# (as root, or through sudo). Usage: apt_install pkg...
apt_install() {
    (($#)) || return 0
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "need root or sudo to install $*" >&2; return 1; }
        sudo=sudo
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
