#!/usr/bin/env bash
# tier-smoke.sh: end-to-end check of contrib/fleet/nginx-tier.conf with Debian's nginx.
#
# Starts an nginx "origin" (HTTPS with a test CA, plain HTTP, and HTTPS with an untrusted
# self-signed certificate) and three tiers built from nginx-tier.conf (one with the deny list minus
# loopback so it can reach the origin on 127.0.0.1, one with the production deny list, one chained
# to the first as README.md shows), then checks caching, request coalescing, keys, raw paths,
# redirects, the deny list, the X-Tier-Error marker, revalidation and chaining.
# Prints PASS/FAIL per check; exits 1 if any failed, 2 if it could not set up.
#
# Run as root (or any user that may run nginx); writes only under a temp dir that it removes;
# uses free ports on 127.0.0.1; stops only the nginx processes it started (by their pid files).
#   bash contrib/fleet/tier-smoke.sh            (NGINX=/path/to/nginx to use another binary)
#
# render_tier below is the recipe for running the tier in a test: copy nginx-tier.conf and
# rewrite its EDIT values (listen, cache path, CA bundle, resolver), put a deny list beside it as
# imgd-tier/tier-deny.conf, and wrap it in a minimal main config. Other tests can have it done:
#   tier-smoke.sh --render DIR PORT CAFILE [DNSPORT]    (writes DIR/nginx.conf, starts nothing)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NGINX=${NGINX:-/usr/sbin/nginx}
START=$(date +%s.%N)

die() { echo "tier-smoke: $*" >&2; exit 2; }
for tool in "$NGINX" openssl curl cmp awk sed ps; do
    command -v "$tool" >/dev/null || die "$tool not found"
done

STARTED=()   # nginx prefix directories, for cleanup

# alive PID: the process exists and is not a zombie (the daemonized master's parent is init,
# which may take a while to reap it; a zombie runs nothing).
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ $st != Z* ]]
}

# stop_nginx DIR: SIGQUIT (graceful) to the master in DIR/nginx.pid, SIGTERM after 5 s; waits
# for the master and its children (workers, cache manager/loader) to be gone.
stop_nginx() {
    local dir=$1 pid kids
    [[ -s $dir/nginx.pid ]] || return 0
    pid=$(cat "$dir/nginx.pid")
    kids=$(ps -o pid= --ppid "$pid" 2>/dev/null | tr '\n' ' ' || true)
    kill -QUIT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
    for k in $kids; do
        for _ in $(seq 50); do alive "$k" || break; sleep 0.1; done
    done
    rm -f "$dir/nginx.pid"
    echo "$pid $kids" >"$dir/stopped.pids"
}

cleanup() {
    local dir
    for dir in "${STARTED[@]}"; do stop_nginx "$dir"; done
    [[ ${KEEP:-0} == 1 ]] && { echo "kept $TMP"; return; }
    rm -rf "$TMP"
}

free_port() {
    if command -v python3 >/dev/null; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    else
        local p
        while :; do
            p=$((20000 + RANDOM % 40000))
            ss -Htanu | awk '{print $5}' | grep -q ":$p\$" || { echo "$p"; return; }
        done
    fi
}

# start_nginx DIR: validates DIR/nginx.conf with nginx -t, starts it, waits for the pid file.
start_nginx() {
    local dir=$1
    "$NGINX" -t -q -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx -t failed for $dir"
    "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" || die "nginx did not start in $dir"
    STARTED+=("$dir")
    for _ in $(seq 50); do [[ -s $dir/nginx.pid ]] && break; sleep 0.1; done
    [[ -s $dir/nginx.pid ]] || die "no pid file in $dir"
}

# main_conf DIR WORKERS BODY: a minimal main config with pid, logs and temp paths in DIR.
main_conf() {
    local dir=$1 workers=$2 body=$3
    cat >"$dir/nginx.conf" <<EOF
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 256; }
http {
    default_type application/octet-stream;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy_temp;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
$body
}
EOF
}

# render_tier DIR PORT DENYFILE CAFILE DNSPORT: the tier from nginx-tier.conf on 127.0.0.1:PORT,
# cache in DIR/cache, trusting CAFILE, resolving through 127.0.0.1:DNSPORT.
render_tier() {
    local dir=$1 port=$2 deny=$3 ca=$4 dns=$5
    mkdir -p "$dir/imgd-tier"
    cp "$deny" "$dir/imgd-tier/tier-deny.conf"
    sed -e "s|^\([[:space:]]*\)listen 8080;|\1listen 127.0.0.1:$port;|" \
        -e "s|/var/cache/nginx/imgd-tier|$dir/cache|" \
        -e "s|/etc/ssl/certs/ca-certificates.crt|$ca|" \
        -e "s|resolver 127\.0\.0\.53[^;]*;|resolver 127.0.0.1:$dns;|" \
        -e "s|resolver_timeout [^;]*;|resolver_timeout 1s;|" \
        "$HERE/nginx-tier.conf" >"$dir/imgd-tier.conf"
    # If nginx-tier.conf changes its defaults, fail here rather than test the wrong thing.
    grep -q "listen 127.0.0.1:$port;" "$dir/imgd-tier.conf" || die "render_tier: listen not rewritten"
    grep -q "$dir/cache " "$dir/imgd-tier.conf" || die "render_tier: cache path not rewritten"
    grep -q "proxy_ssl_trusted_certificate $ca;" "$dir/imgd-tier.conf" || die "render_tier: CA not rewritten"
    grep -q "resolver 127.0.0.1:$dns;" "$dir/imgd-tier.conf" || die "render_tier: resolver not rewritten"
    main_conf "$dir" 2 "    log_format tier '\$request_uri \$status cache=\$upstream_cache_status';
    access_log $dir/access.log tier;
    include $dir/imgd-tier.conf;"
}

# test_deny OUT: the production deny list without its loopback line, for an origin on 127.0.0.1.
test_deny() {
    grep -v '# loopback-v4$' "$HERE/tier-deny.conf" >"$1"
    ! grep -q '^"~^127' "$1" || die "test deny list still refuses 127.0.0.0/8"
}

# tier-smoke.sh --render DIR PORT CAFILE [DNSPORT]: only write a tier for another test (the imgd
# integration test) into DIR: DIR/nginx.conf listening on 127.0.0.1:PORT, cache in DIR/cache,
# trusting CAFILE, the test deny list (127.0.0.1 allowed). Prints the command that starts it.
# DIR's parents must be traversable by the nginx workers' user (nobody when run as root).
if [[ ${1:-} == --render ]]; then
    [[ $# -ge 4 ]] || die "usage: $0 --render DIR PORT CAFILE [DNSPORT]"
    mkdir -p "$2"
    dir=$(cd "$2" && pwd)
    test_deny "$dir/test-deny.conf"
    render_tier "$dir" "$3" "$dir/test-deny.conf" "$4" "${5:-53}"
    echo "$NGINX -p $dir -e $dir/error.log -c $dir/nginx.conf"
    exit 0
fi

TMP=$(mktemp -d /tmp/tier-smoke.XXXXXX)
# The nginx workers run as an unprivileged user (nobody): they must reach the files.
chmod 755 "$TMP"
trap cleanup EXIT

# --- certificates: a test CA with a server certificate for 127.0.0.1, and an untrusted one ----
mkdir -p "$TMP/pki"
(
    cd "$TMP/pki"
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=tier-smoke CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req "${ec[@]}" -keyout origin.key -out origin.csr -subj "/CN=127.0.0.1"
    # An IP SAN: the tier verifies the name "127.0.0.1" (proxy_ssl_name) against it.
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >origin.ext
    openssl x509 -req -in origin.csr -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
        -days 2 -extfile origin.ext -out origin.pem
    openssl req -x509 "${ec[@]}" -keyout untrusted.key -out untrusted.pem -days 2 -subj "/CN=127.0.0.1" \
        -addext "subjectAltName=IP:127.0.0.1"
    chmod 644 ./*
) >"$TMP/pki/openssl.log" 2>&1 || { cat "$TMP/pki/openssl.log" >&2; die "openssl failed"; }

# --- origin ------------------------------------------------------------------------------------
O=$TMP/origin
mkdir -p "$O" "$TMP/www"
for f in a.png b.png c.png fresh.png; do head -c $((3000 + RANDOM % 5000)) /dev/urandom >"$TMP/www/$f"; done
head -c 65536 /dev/urandom >"$TMP/www/slow.png"
chmod -R a+rX "$TMP/www"
P_TLS=$(free_port); P_HTTP=$(free_port); P_BAD=$(free_port)
# One worker: its log lines are in the order it finished the requests (the checks below rely on a
# sentinel request being logged after any earlier one).
main_conf "$O" 1 "    log_format origin '\$request_uri \$status inm=\"\$http_if_none_match\" ims=\"\$http_if_modified_since\"';
    server {
        listen 127.0.0.1:$P_TLS ssl;
        ssl_certificate $TMP/pki/origin.pem;
        ssl_certificate_key $TMP/pki/origin.key;
        root $TMP/www;
        access_log $O/tls.log origin;
        location / { }
        # Slow enough (about 2 s) that concurrent requests overlap with the first one.
        location = /slow.png { limit_rate 32k; }
        location = /fresh.png { expires 1s; }
        location = /fail { return 503; }
        location = /moved { return 302 https://127.0.0.1:$P_TLS/a.png?from=moved; }
    }
    server {
        listen 127.0.0.1:$P_HTTP;
        root $TMP/www;
        access_log $O/http.log origin;
    }
    server {
        listen 127.0.0.1:$P_BAD ssl;
        ssl_certificate $TMP/pki/untrusted.pem;
        ssl_certificate_key $TMP/pki/untrusted.key;
        root $TMP/www;
        access_log $O/bad.log origin;
    }"
start_nginx "$O"

# --- tiers -------------------------------------------------------------------------------------
DNS=$(free_port)   # nothing listens there: every name fails to resolve (within resolver_timeout)
T=$TMP/tier; TP=$(free_port)
mkdir -p "$T"
test_deny "$TMP/test-deny.conf"
render_tier "$T" "$TP" "$TMP/test-deny.conf" "$TMP/pki/ca.pem" "$DNS"
start_nginx "$T"
TPROD=$TMP/tier-prod; TPP=$(free_port)
mkdir -p "$TPROD"
render_tier "$TPROD" "$TPP" "$HERE/tier-deny.conf" "$TMP/pki/ca.pem" "$DNS"
start_nginx "$TPROD"
# A site tier chained to the first one as its regional tier, as README.md shows: the regional
# proxy_pass line instead of the direct one, and the regional tier's X-Tier-Error kept.
TSITE=$TMP/tier-site; TSP=$(free_port)
mkdir -p "$TSITE"
render_tier "$TSITE" "$TSP" "$TMP/test-deny.conf" "$TMP/pki/ca.pem" "$DNS"
sed -i -e 's|^\([[:space:]]*\)proxy_pass \$tier_scheme://|\1# &|' \
    -e "s|^\\([[:space:]]*\\)# proxy_pass http://regional-tier.example.net:8080/|\\1proxy_pass http://127.0.0.1:$TP/|" \
    -e 's|^\([[:space:]]*\)proxy_hide_header X-Tier-Error;|\1# &|' "$TSITE/imgd-tier.conf"
[[ $(grep -c "^ *proxy_pass http://127.0.0.1:$TP/\$tier_scheme/\$tier_hostport\$tier_uri;" "$TSITE/imgd-tier.conf") == 1 &&
    $(grep -c '^ *proxy_pass ' "$TSITE/imgd-tier.conf") == 1 && $(grep -c '^ *proxy_hide_header X-Tier-Error' "$TSITE/imgd-tier.conf") == 0 ]] ||
    die "could not chain the site tier (nginx-tier.conf's proxy_pass lines changed?)"
start_nginx "$TSITE"

# --- helpers -----------------------------------------------------------------------------------
FAILS=0
N=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

# get URL NAME: GET URL; body in $TMP/r/NAME.body, headers in NAME.hdr; prints the status.
mkdir -p "$TMP/r"
get() {
    curl -s --max-time 20 -o "$TMP/r/$2.body" -D "$TMP/r/$2.hdr" -w '%{http_code}' "$1" || true
}
# hdr NAME HEADER: the value of HEADER in NAME.hdr (empty if absent).
hdr() {
    [[ -f $TMP/r/$1.hdr ]] || return 0   # no answer at all: the checks report the status
    awk -v h="$(echo "$2" | tr 'A-Z' 'a-z')" -F': ' \
        'tolower($1) == h { sub(/\r$/, "", $2); print $2 }' "$TMP/r/$1.hdr"
}
# count LOG URI: how many requests for URI (exactly) the origin logged.
count() {
    [[ -f $O/$1.log ]] || { echo 0; return; }
    awk -v u="$2" '$1 == u' "$O/$1.log" | wc -l
}
# settle LOG: waits until a sentinel request made now shows in LOG, so every request the origin
# answered before it is logged too.
settle() {
    local log=$1 port uri scheme=https
    case $log in tls) port=$P_TLS ;; http) port=$P_HTTP; scheme=http ;; esac
    N=$((N + 1)); uri="/sentinel-$N"
    curl -s -k -o /dev/null "$scheme://127.0.0.1:$port$uri" || true
    for _ in $(seq 50); do [[ $(count "$log" "$uri") -ge 1 ]] && return 0; sleep 0.1; done
    die "origin never logged $uri"
}

TIER=http://127.0.0.1:$TP
PROD=http://127.0.0.1:$TPP
ORIG=127.0.0.1:$P_TLS

# a. bytes, MISS then HIT, one origin request.
s1=$(get "$TIER/https/$ORIG/a.png?x=1" a1); c1=$(hdr a1 X-Cache-Status)
s2=$(get "$TIER/https/$ORIG/a.png?x=1" a2); c2=$(hdr a2 X-Cache-Status)
settle tls
if [[ $s1 == 200 && $s2 == 200 && $c1 == MISS && $c2 == HIT ]] &&
    cmp -s "$TMP/r/a1.body" "$TMP/www/a.png" && cmp -s "$TMP/r/a2.body" "$TMP/www/a.png" &&
    [[ $(count tls "/a.png?x=1") == 1 ]]; then
    pass "a. https via tier: bytes equal, MISS then HIT, origin saw 1 request"
else
    fail "a. https via tier: status $s1/$s2, cache $c1/$c2, origin requests $(count tls "/a.png?x=1")"
fi

# b. 20 concurrent first requests for one URL: one origin request (proxy_cache_lock).
pids=()
for i in $(seq 20); do get "$TIER/https/$ORIG/slow.png" "slow$i" >"$TMP/r/slow$i.status" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
settle tls
ok=1; statuses=""
for i in $(seq 20); do
    statuses+="$(cat "$TMP/r/slow$i.status"):$(hdr "slow$i" X-Cache-Status) "
    [[ $(cat "$TMP/r/slow$i.status") == 200 ]] && cmp -s "$TMP/r/slow$i.body" "$TMP/www/slow.png" || ok=0
done
if [[ $ok == 1 && $(count tls /slow.png) == 1 ]]; then
    pass "b. 20 concurrent misses: identical bytes, origin saw 1 request"
else
    fail "b. 20 concurrent misses: origin requests $(count tls /slow.png); $statuses"
fi

# c. the query string is part of the key.
s=$(get "$TIER/https/$ORIG/a.png?x=2" c1); c=$(hdr c1 X-Cache-Status)
settle tls
if [[ $s == 200 && $c == MISS && $(count tls "/a.png?x=2") == 1 && $(count tls "/a.png?x=1") == 1 ]] &&
    cmp -s "$TMP/r/c1.body" "$TMP/www/a.png"; then
    pass "c. ?x=2 is its own key: a separate origin request"
else
    fail "c. ?x=2: status $s, cache $c, origin requests x=2: $(count tls "/a.png?x=2"), x=1: $(count tls "/a.png?x=1")"
fi

# c. the path and query reach the origin as sent (raw: percent-escapes kept, slashes not merged).
s=$(get "$TIER/https/$ORIG//a%2Epng?q=%20y" c2)
settle tls
if [[ $s == 200 && $(count tls "//a%2Epng?q=%20y") == 1 ]] && cmp -s "$TMP/r/c2.body" "$TMP/www/a.png"; then
    pass "c. path and query passed raw: origin saw //a%2Epng?q=%20y"
else
    fail "c. raw path: status $s; origin log: $(tail -3 "$O/tls.log" | tr '\n' '|')"
fi

# d. plain http origin.
s1=$(get "$TIER/http/127.0.0.1:$P_HTTP/b.png" d1); s2=$(get "$TIER/http/127.0.0.1:$P_HTTP/b.png" d2)
c1=$(hdr d1 X-Cache-Status); c2=$(hdr d2 X-Cache-Status)
settle http
if [[ $s1 == 200 && $s2 == 200 && $c1 == MISS && $c2 == HIT && $(count http /b.png) == 1 ]] &&
    cmp -s "$TMP/r/d1.body" "$TMP/www/b.png" && cmp -s "$TMP/r/d2.body" "$TMP/www/b.png"; then
    pass "d. http via tier: bytes equal, MISS then HIT, origin saw 1 request"
else
    fail "d. http via tier: status $s1/$s2, cache $c1/$c2, origin requests $(count http /b.png)"
fi

# d. a redirect is passed to the client as the origin sent it, not followed by the tier.
s=$(get "$TIER/https/$ORIG/moved" r1); loc=$(hdr r1 Location)
settle tls
if [[ $s == 302 && $loc == "https://$ORIG/a.png?from=moved" && -z $(hdr r1 X-Tier-Error) &&
    $(count tls "/a.png?from=moved") == 0 ]]; then
    pass "d. origin 302 passes through unchanged (Location kept, not followed)"
else
    fail "d. redirect: status $s, Location '$loc', origin requests for the target $(count tls "/a.png?from=moved")"
fi

# e. bad URLs are 400; the production deny list refuses inside targets with 403, sending nothing.
ok=1; detail=""
for path in "/ftp/$ORIG/a.png" "/https/" "/https//a.png" "/https/a..b/x" "/https/$ORIG" ; do
    s=$(get "$TIER$path" e); m=$(hdr e X-Tier-Error)
    # "/https/127.0.0.1:PORT" (no path) is valid: the origin's "/" (403 from the origin, unmarked).
    if [[ $path == "/https/$ORIG" ]]; then
        [[ $s != 400 && -z $m ]] || { ok=0; detail+=" $path:$s:$m"; }
    else
        [[ $s == 400 && $m == bad-request ]] || { ok=0; detail+=" $path:$s:$m"; }
    fi
done
s=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$TIER/https/$ORIG/a.png" || true)
[[ $s == 405 ]] || { ok=0; detail+=" POST:$s"; }
if [[ $ok == 1 ]]; then pass "e. bad scheme, empty or malformed host → 400 bad-request; POST → 405"
else fail "e. bad URLs:$detail"; fi

ok=1; detail=""
for target in "https/169.254.169.254/x" "http/127.0.0.1:$P_HTTP/x" "https/127.0.0.1:$P_TLS/x" \
    "http/0.0.0.0:$P_HTTP/x" "http/10.1.2.3/x" "http/172.20.0.1/x" "http/192.168.1.1/x" \
    "http/100.64.0.1/x" "http/[::1]:$P_HTTP/x" "http/[fe80::1]/x" "http/[fd00::1]/x" \
    "http/[::ffff:127.0.0.1]:$P_HTTP/x" "http/localhost:$P_HTTP/x" "http/LOCALHOST:$P_HTTP/x" \
    "http/metadata.google.internal/x" "http/2130706433:$P_HTTP/x" "http/127.1:$P_HTTP/x" \
    "http/0x7f.0.0.1:$P_HTTP/x" "http/0177.0.0.1:$P_HTTP/x"; do
    s=$(get "$PROD/$target" e); m=$(hdr e X-Tier-Error)
    [[ $s == 403 && $m == denied ]] || { ok=0; detail+=" $target:$s:$m"; }
done
settle tls; settle http
[[ $(count tls /x) == 0 && $(count http /x) == 0 ]] || { ok=0; detail+=" origin saw /x"; }
# Not over-broad: a public name is not refused; it fails to resolve here (no DNS), a tier error.
s=$(get "$PROD/https/cdn.example.com/x" e); m=$(hdr e X-Tier-Error)
[[ $s == 502 && $m == upstream ]] || { ok=0; detail+=" cdn.example.com:$s:$m"; }
if [[ $ok == 1 ]]; then
    pass "e. production deny list: 19 inside targets → 403 denied, origin saw nothing; a public name is not refused"
else
    fail "e. deny list:$detail"
fi

# f. untrusted origin certificate → 502 + X-Tier-Error; the origin's own 503 → 503 unmarked.
s1=$(get "$TIER/https/127.0.0.1:$P_BAD/a.png" f1); m1=$(hdr f1 X-Tier-Error)
s2=$(get "$TIER/https/$ORIG/fail" f2); m2=$(hdr f2 X-Tier-Error)
settle tls
if [[ $s1 == 502 && $m1 == upstream && $s2 == 503 && -z $m2 && $(count tls /fail) == 1 ]] &&
    [[ ! -s $O/bad.log ]] && grep -q 'certificate verify' "$T/error.log"; then
    pass "f. untrusted origin cert → 502 X-Tier-Error: upstream; origin 503 → 503 without marker"
else
    fail "f. untrusted cert: $s1 marker '$m1'; origin 503: $s2 marker '$m2'"
fi

# g. revalidation: after max-age=1 has passed, a conditional request and a 304 from the origin.
s1=$(get "$TIER/https/$ORIG/fresh.png" g1); c1=$(hdr g1 X-Cache-Status)
sleep 2.2   # the entry's lifetime (max-age=1) must pass: a wait on the clock is the point here
s2=$(get "$TIER/https/$ORIG/fresh.png" g2); c2=$(hdr g2 X-Cache-Status)
settle tls
second=$(awk '$1 == "/fresh.png"' "$O/tls.log" | sed -n 2p)
if [[ $s1 == 200 && $c1 == MISS && $s2 == 200 && $c2 == REVALIDATED ]] &&
    cmp -s "$TMP/r/g2.body" "$TMP/www/fresh.png" && [[ $(count tls /fresh.png) == 2 ]] &&
    [[ $second == "/fresh.png 304 "* && $second != *'inm="-"'* ]]; then
    pass "g. expired entry → REVALIDATED: origin got If-None-Match and answered 304"
else
    fail "g. revalidation: $s1/$c1 then $s2/$c2; origin: $(awk '$1 == "/fresh.png"' "$O/tls.log" | tr '\n' '|')"
fi

# i. chained tiers: site tier → regional tier → origin; the regional tier's error marker survives.
SITE=http://127.0.0.1:$TSP
s1=$(get "$SITE/https/$ORIG/c.png" i1); c1=$(hdr i1 X-Cache-Status)
s2=$(get "$SITE/https/$ORIG/c.png" i2); c2=$(hdr i2 X-Cache-Status)
s3=$(get "$SITE/https/127.0.0.1:$P_BAD/c.png" i3); m3=$(hdr i3 X-Tier-Error)
settle tls
regional=$(awk '$1 == "/https/'"$ORIG"'/c.png"' "$T/access.log" | wc -l)
if [[ $s1 == 200 && $c1 == MISS && $s2 == 200 && $c2 == HIT && $regional == 1 && $(count tls /c.png) == 1 &&
    $s3 == 502 && $m3 == upstream ]] && cmp -s "$TMP/r/i1.body" "$TMP/www/c.png" && cmp -s "$TMP/r/i2.body" "$TMP/www/c.png"; then
    pass "i. chained tiers: MISS then HIT at the site, regional and origin saw 1 request; regional 502 keeps X-Tier-Error"
else
    fail "i. chained: $s1/$c1 then $s2/$c2, regional requests $regional, origin $(count tls /c.png); bad cert: $s3 '$m3'"
fi

# h. stopping leaves nothing running.
ok=1
for dir in "$T" "$TPROD" "$TSITE" "$O"; do
    stop_nginx "$dir"
    for p in $(cat "$dir/stopped.pids"); do alive "$p" && ok=0; done
done
STARTED=()
# Nothing else started from the temp dir either (a stray nginx with a path under it).
if command -v pgrep >/dev/null && pgrep -f -- "$TMP/" >/dev/null; then ok=0; fi
if [[ $ok == 1 ]]; then pass "h. tiers and origin stopped: no process left"
else fail "h. processes left: $(cat "$T/stopped.pids" "$TPROD/stopped.pids" "$TSITE/stopped.pids" "$O/stopped.pids")"; fi

awk -v f="$FAILS" -v a="$START" -v b="$(date +%s.%N)" 'BEGIN { printf "tier-smoke: %d failed, %.1f s\n", f, b - a }'
[[ $FAILS == 0 ]]
