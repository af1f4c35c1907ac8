// Package auth verifies the JSON Web Tokens that senders (/logic/send) and
// viewers (/ws) present, with one Verifier for both doors, so an application
// that already issues JWTs for Centrifugo, AnyCable or its own API can issue
// ours the same way.
//
// # Keys and algorithms
//
// A Verifier holds an HMAC secret, public keys read from PEM files, or both.
// The algorithm is pinned by key type, never taken on trust from the token:
//
//	hmac_secret            HS256 only (secret of at least 32 bytes)
//	RSA public key (PEM)   RS256 only (modulus of at least 2048 bits)
//	EC public key (PEM)    ES256 only (curve P-256)
//
// Any other "alg", "none" included, is refused. An HS256 token is checked
// against the HMAC secret alone, so a token "signed" with HS256 using the
// bytes of a published RSA or EC public key as the secret fails. Several PEM
// files (and several keys per file) may be listed: a token is accepted when
// any key of its algorithm's type verifies it, which is how keys rotate: add
// the new public key, move the issuer over, remove the old key.
//
// # Claims
//
//	sub    required  the user id as a string: a positive decimal integer in
//	                 canonical form ("42", not "042"), the same id both doors use
//	exp    required  expiry, NumericDate
//	nbf    optional  not before, NumericDate
//	iss    optional  checked when the Verifier's issuer is set
//	aud    optional  checked when the Verifier's audience is set
//	name   optional  display name
//	rooms  optional  room ids or "prefix*" patterns the token may use;
//	                 absent (or null) means any room, [] means none
//	roles  optional  role names the token grants (Claims.HasRole):
//	                 "moderator" moderates the rooms of its rooms claim and
//	                 may send high priority, "member" may send in
//	                 members-only rooms, "priority" may send high priority;
//	                 other names are carried for the application
//
// # Errors
//
// Every failure of Verify is a *danmaku.Error with code EUNAUTH, field
// "token" and a message saying what was wrong (expired, bad signature, wrong
// algorithm, missing exp, bad sub, ...). Messages never contain the token or
// any value taken from it.
//
// # Minting a token
//
// From Go, with the HMAC secret the Verifier is configured with:
//
//	tok, err := auth.Mint(secret, auth.Claims{
//		UID:       42,
//		Name:      "alice",
//		Rooms:     []string{"live-7", "quiz-*"},
//		Roles:     []string{auth.RoleModerator},
//		ExpiresAt: time.Now().Add(time.Hour),
//	})
//
// From a shell (bash, openssl):
//
//	b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
//	secret='at-least-32-bytes-of-secret......'
//	header=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
//	payload=$(printf '{"sub":"42","name":"alice","exp":%d}' $(( $(date +%s) + 3600 )) | b64url)
//	sig=$(printf '%s.%s' "$header" "$payload" |
//		openssl dgst -sha256 -hmac "$secret" -binary | b64url)
//	echo "$header.$payload.$sig"
//
// An RS256 token from a shell uses the private key instead of the HMAC:
//
//	sig=$(printf '%s.%s' "$header" "$payload" |
//		openssl dgst -sha256 -sign private.pem -binary | b64url)
//
// with header {"alg":"RS256","typ":"JWT"}; the Verifier is given the public
// key (openssl pkey -in private.pem -pubout -out public.pem). openssl writes
// ECDSA signatures in DER, while ES256 wants the raw 64-byte r||s, so ES256
// tokens are best minted with a JWT library.
package auth
