# shellcheck shell=bash
# TLS files for a test engine (sourced by remote-engine.sh and swarm.sh):
#   tls_make DIR SERVER_DIR NAME SAN
# makes a CA in DIR/ca, a client certificate in DIR/client ({ca,cert,key}.pem,
# 0644: what DOCKER_CERT_PATH names) and a server certificate for SAN (e.g.
# "IP:10.0.0.2,IP:127.0.0.1,DNS:localhost") in SERVER_DIR ({ca,server-cert}.pem,
# server-key.pem 0600). EC P-256 keys, valid for 7 days; NAME names the CA.
tls_make() {
  local out=$2 name=$3 san=$4 ca="$1/ca" cl="$1/client" t="$1/ca/tmp"
  mkdir -p "$ca" "$cl" "$t" "$out"
  _tls_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
  _tls_sign() { # NAME KEY OUT CN EXTENSIONS
    openssl req -new -key "$2" -subj "/CN=$4" -out "$t/$1.csr" 2>/dev/null
    printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature subjectKeyIdentifier=hash \
      authorityKeyIdentifier=keyid "$5" >"$t/$1.ext"
    openssl x509 -req -in "$t/$1.csr" -CA "$ca/ca.pem" -CAkey "$ca/ca-key.pem" -CAcreateserial \
      -sha256 -days 7 -extfile "$t/$1.ext" -out "$3" 2>/dev/null
  }
  _tls_key "$ca/ca-key.pem"
  openssl req -x509 -new -key "$ca/ca-key.pem" -sha256 -days 7 -subj "/CN=$name CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -out "$ca/ca.pem" 2>/dev/null
  _tls_key "$out/server-key.pem"
  _tls_sign server "$out/server-key.pem" "$out/server-cert.pem" "$name" \
    "extendedKeyUsage=serverAuth
subjectAltName=$san"
  _tls_key "$cl/key.pem"
  _tls_sign client "$cl/key.pem" "$cl/cert.pem" berth-client extendedKeyUsage=clientAuth
  cp "$ca/ca.pem" "$cl/ca.pem"
  cp "$ca/ca.pem" "$out/ca.pem"
  rm -rf "${t:?}"
  chmod 644 "$cl"/*.pem
  chmod 600 "$out/server-key.pem"
}
