//! OIDC for people (issue 46), against the real `converge` binary, PostgreSQL and a real
//! issuer started in the test (`converge_auth::testing::issuer`: discovery, JWKS and ES256
//! keys of its own, tokens signed with the real private key): tokens of admin, operator and
//! viewer people act with their roles and are recorded by name; a token with no converge role
//! is 403; expired, not-yet-valid, wrong-audience, wrong-issuer, foreign-signature,
//! unknown-kid, HS256-with-the-public-key and `alg: none` tokens are 401; a flood of unknown
//! `kid`s does not make converge hammer the issuer; a key rotation at the issuer is followed
//! without a restart; an issuer down at boot stops nothing and is used once up (503 until
//! then); OIDC_ROLE_MAP maps group names; an OIDC person's watch stays open; and
//! the tokens of the AUTH_FILE keep working beside OIDC; `GET /api/v1/auth/config` tells the
//! UI, without a credential, how to sign in, and the CSP lets it reach the token endpoint;
//! the UI's sign-in (authorization code + PKCE at the issuer's `/authorize` and `/token`)
//! yields an ID token converge accepts, and the code exchange refuses a wrong verifier, a
//! wrong redirect URI and a used code.

mod common;

use std::{path::PathBuf, time::Duration};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{
    Converge,
    sse::{Chunks, open_watch},
    wait_for,
};
use converge_auth::testing::{
    issuer::{Issuer, SigningKey, forge_hs256, forge_none, pkce_challenge},
    principal_line,
};
use reqwest::Method;
use serde_json::{Value, json};

const ADMIN: &str = "tok-admin-0123456789";
const AUD: &str = "converge";
const T: Duration = Duration::from_secs(30);

/// A scratch directory with an AUTH_FILE (admin `ops`), removed on drop.
struct AuthDir(PathBuf);

impl AuthDir {
    fn new() -> AuthDir {
        let dir = converge_auth::testing::scratch_dir("oidc");
        let y = format!(
            "principals:\n{}",
            principal_line("ops", "admin", ADMIN, &[])
        );
        std::fs::write(dir.join("auth.yaml"), y).unwrap();
        AuthDir(dir)
    }

    fn file(&self) -> String {
        self.0.join("auth.yaml").to_str().unwrap().to_string()
    }
}

impl Drop for AuthDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// converge trusting `issuer` (plus `env`), with the hello kind applied by the file's admin.
async fn start(dir: &AuthDir, issuer: &Issuer, env: &[(&str, &str)]) -> Converge {
    let file = dir.file();
    let mut all = vec![
        ("AUTH_FILE", file.as_str()),
        ("OIDC_ISSUER", issuer.url.as_str()),
        ("OIDC_AUDIENCE", AUD),
    ];
    all.extend_from_slice(env);
    let c = Converge::start(&all).await;
    let (s, v) = c
        .call_as(
            Some(ADMIN),
            Method::PUT,
            "kinds/hello/manifest",
            Some(&Converge::hello_manifest(30)),
        )
        .await;
    assert!((200..300).contains(&s), "{s} {v}");
    c
}

/// `GET whoami` as `token`: (status, body).
async fn whoami(c: &Converge, token: &str) -> (u16, Value) {
    c.call_as(Some(token), Method::GET, "whoami", None).await
}

/// Polls `whoami` as `token` until it answers `status` (the first calls may come before
/// converge has the issuer's keys: 503 until then).
async fn until_status(c: &Converge, token: &str, status: u16, what: &str) -> Value {
    wait_for(T, what, || async {
        let (s, v) = whoami(c, token).await;
        (s == status).then_some(v)
    })
    .await
}

fn hello(name: &str) -> Value {
    json!({"kind": "hello", "kind_version": 1, "name": name, "spec": {}})
}

#[tokio::test]
async fn people_act_with_their_roles_and_are_recorded_by_name() {
    let issuer = Issuer::start().await;
    let dir = AuthDir::new();
    let c = start(&dir, &issuer, &[("OIDC_CLIENT_ID", "converge-ui")]).await;
    let viewer = issuer.token("vera", AUD, json!(["viewer"]));
    let operator = issuer.token("otto", AUD, json!(["operator", "viewer"]));
    let admin = issuer.token("ada", AUD, json!("admin"));

    let v = until_status(&c, &viewer, 200, "the viewer's token accepted").await;
    assert_eq!(
        (
            v["name"].as_str(),
            v["role"].as_str(),
            v["authenticated"].as_bool()
        ),
        (Some("oidc:vera"), Some("viewer"), Some(true)),
        "{v}"
    );
    // How to sign in, without a credential: the issuer, the UI's client and its endpoints;
    // and the CSP lets the UI reach the token endpoint.
    let r = c
        .client
        .get(format!("{}/api/v1/auth/config", c.http))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains(&format!("connect-src 'self' {};", issuer.url)),
        "{csp}"
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["oidc"],
        json!({
            "issuer": issuer.url, "client_id": "converge-ui", "scopes": "openid profile email",
            "authorization_endpoint": format!("{}/authorize", issuer.url),
            "token_endpoint": format!("{}/token", issuer.url),
        })
    );
    // A viewer reads and cannot write.
    let (s, _) = c
        .call_as(Some(&viewer), Method::GET, "resources", None)
        .await;
    assert_eq!(s, 200);
    let (s, v) = c
        .call_as(Some(&viewer), Method::POST, "resources", Some(&hello("r1")))
        .await;
    assert_eq!(s, 403, "{v}");
    // An operator applies, recorded as its name; it cannot touch tokens.
    let (s, v) = c
        .call_as(
            Some(&operator),
            Method::POST,
            "resources",
            Some(&hello("r1")),
        )
        .await;
    assert!((200..300).contains(&s), "{s} {v}");
    let (s, v) = c
        .call_as(
            Some(&viewer),
            Method::GET,
            "resources/hello/r1/events",
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let created = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "created")
        .unwrap_or_else(|| panic!("no created event: {v}"));
    assert_eq!(created["actor"], "oidc:otto", "{created}");
    let (s, _) = c
        .call_as(Some(&operator), Method::GET, "tokens", None)
        .await;
    assert_eq!(s, 403);
    // An admin lists and mints tokens, recorded as the minter.
    let (s, _) = c.call_as(Some(&admin), Method::GET, "tokens", None).await;
    assert_eq!(s, 200);
    let (s, v) = c
        .call_as(
            Some(&admin),
            Method::POST,
            "tokens",
            Some(&json!({"name": "ci", "role": "viewer"})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (_, list) = c.call_as(Some(&admin), Method::GET, "tokens", None).await;
    assert_eq!(list["items"][0]["created_by"], "oidc:ada", "{list}");
    // The prefix is reserved: no token may pass for a person.
    let (s, v) = c
        .call_as(
            Some(&admin),
            Method::POST,
            "tokens",
            Some(&json!({"name": "oidc:ada", "role": "admin"})),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    // A person the issuer vouches for but who holds no converge role: 403, said so.
    let nobody = issuer.token("nemo", AUD, json!(["staff"]));
    let (s, v) = whoami(&c, &nobody).await;
    assert_eq!(s, 403, "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains("no converge role"),
        "{v}"
    );
    // A claim naming `worker` grants nothing: people never get the worker role.
    let (s, _) = whoami(&c, &issuer.token("w", AUD, json!(["worker"]))).await;
    assert_eq!(s, 403);
    // The AUTH_FILE's tokens keep working beside OIDC.
    let (s, v) = whoami(&c, ADMIN).await;
    assert_eq!((s, v["name"].as_str()), (200, Some("ops")), "{v}");
    // The OpenAPI document shows the kinds' schemas to a person who may read, not to anyone.
    let doc = |token: Option<&str>| {
        let mut r = c.client.get(format!("{}/openapi.json", c.http));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move { r.send().await.unwrap().text().await.unwrap() }
    };
    assert_ne!(
        doc(Some(&viewer)).await,
        doc(None).await,
        "kinds shown to an OIDC viewer"
    );
}

#[tokio::test]
async fn forged_stale_and_misdirected_tokens_are_refused() {
    let issuer = Issuer::start().await;
    let dir = AuthDir::new();
    // The default cooldown (30 s): the flood below must not reach the issuer.
    let c = start(&dir, &issuer, &[]).await;
    let good = issuer.token("ada", AUD, json!(["admin"]));
    until_status(&c, &good, 200, "a good token accepted").await;
    let key = issuer.key();
    let now = converge_auth::oidc::now_secs();
    let with = |patch: Value| {
        let mut claims = issuer.claims("ada", AUD, json!(["admin"]));
        for (k, v) in patch.as_object().unwrap() {
            claims[k] = v.clone();
        }
        claims
    };
    let foreign = SigningKey::generate(&key.kid);
    let cases: Vec<(&str, String, &str)> = vec![
        // Past exp by more than the 60 s leeway.
        (
            "expired",
            key.sign(&with(json!({"exp": now - 300, "iat": now - 900}))),
            "expired",
        ),
        (
            "not yet valid",
            key.sign(&with(json!({"nbf": now + 600}))),
            "not valid yet",
        ),
        (
            "wrong audience",
            key.sign(&with(json!({"aud": "someone-else"}))),
            "audience",
        ),
        (
            "wrong issuer",
            key.sign(&with(json!({"iss": "http://127.0.0.1:1"}))),
            "issuer",
        ),
        (
            "no sub",
            {
                let mut cl = with(json!({}));
                cl.as_object_mut().unwrap().remove("sub");
                key.sign(&cl)
            },
            "sub",
        ),
        // Signed by a key the issuer never published, naming the issuer's real kid.
        (
            "foreign signature",
            foreign.sign(&with(json!({}))),
            "signature",
        ),
        (
            "unknown kid",
            foreign.sign_as("made-up", &with(json!({}))),
            "unknown signing key",
        ),
        // The issuer's public key used as an HMAC secret.
        (
            "HS256 with the public key",
            forge_hs256(&key.kid, key.jwk().to_string().as_bytes(), &with(json!({}))),
            "not accepted",
        ),
        (
            "alg none, no signature",
            forge_none(&key.kid, &with(json!({})), ""),
            "unknown or revoked",
        ),
        (
            "alg none, a signature",
            forge_none(&key.kid, &with(json!({})), "c2ln"),
            "JWT",
        ),
        ("garbage JWT", "eyJhbGc.eyJzdWIi.c2ln".into(), "JWT"),
    ];
    for (what, token, says) in &cases {
        let (s, v) = whoami(&c, token).await;
        assert_eq!(s, 401, "{what}: {v}");
        let detail = v["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(says),
            "{what}: {detail:?} should say {says:?}"
        );
    }
    // A flood of made-up kids: at most one re-fetch per cooldown reaches the issuer.
    let before = issuer.jwks_fetches();
    for i in 0..20 {
        let t = foreign.sign_as(&format!("flood-{i}"), &with(json!({})));
        assert_eq!(whoami(&c, &t).await.0, 401);
    }
    let fetched = issuer.jwks_fetches() - before;
    assert!(fetched <= 1, "{fetched} JWKS fetches for 20 unknown kids");
    // The good token still works.
    assert_eq!(whoami(&c, &good).await.0, 200);
}

#[tokio::test]
async fn a_key_rotation_at_the_issuer_is_followed_without_a_restart() {
    let issuer = Issuer::start().await;
    let dir = AuthDir::new();
    let c = start(&dir, &issuer, &[("OIDC_JWKS_COOLDOWN", "1s")]).await;
    let old = issuer.token("ada", AUD, json!(["admin"]));
    until_status(&c, &old, 200, "a token of the first key accepted").await;
    // The issuer swaps to a new key and withdraws the old one.
    let key = issuer.rotate("key-2");
    let new = key.sign(&issuer.claims("ada", AUD, json!(["admin"])));
    // Accepted once converge re-fetches (at most a cooldown after its last fetch).
    let v = until_status(&c, &new, 200, "a token of the rotated key accepted").await;
    assert_eq!(v["name"], "oidc:ada");
    // The old key is gone from the cache with the JWKS that dropped it.
    let (s, v) = whoami(&c, &old).await;
    assert_eq!(s, 401, "{v}");
    // A person's watch stays open (an OIDC principal is in no list: its token's expiry, not
    // a list, decides): an apply made after it opened reaches it.
    let viewer = issuer.token("vera", AUD, json!(["viewer"]));
    let mut watch = open_watch(
        &reqwest::Client::new(),
        &format!("{}/api/v1/events?watch=true", c.http),
        &viewer,
    )
    .await;
    let (s, v) = c
        .call_as(Some(&new), Method::POST, "resources", Some(&hello("seen")))
        .await;
    assert!((200..300).contains(&s), "{s} {v}");
    read_until(&mut watch, "seen").await;
}

#[tokio::test]
async fn an_issuer_down_at_boot_does_not_stop_the_boot_and_is_used_once_up() {
    // A port nobody listens on (yet).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = AuthDir::new();
    let file = dir.file();
    let c = Converge::start(&[
        ("AUTH_FILE", file.as_str()),
        ("OIDC_ISSUER", url.as_str()),
        ("OIDC_AUDIENCE", AUD),
        ("OIDC_JWKS_COOLDOWN", "1s"),
    ])
    .await;
    // Ready, the file's tokens work, and a person's token is "try again" (503), not "invalid".
    assert_eq!(whoami(&c, ADMIN).await.0, 200);
    let now = converge_auth::oidc::now_secs();
    let early = SigningKey::generate("key-1").sign(&json!({
        "iss": url, "aud": AUD, "sub": "ada", "exp": now + 600, "roles": ["admin"],
    }));
    let (s, v) = whoami(&c, &early).await;
    assert_eq!(s, 503, "{v}");
    // Once the issuer answers (converge retries in the background, and on a token), 200.
    let issuer = Issuer::start_on(port).await;
    assert_eq!(issuer.url, url);
    let token = issuer.token("ada", AUD, json!(["admin"]));
    until_status(&c, &token, 200, "the token accepted once the issuer is up").await;
}

#[tokio::test]
async fn role_map_maps_group_names() {
    let issuer = Issuer::start().await;
    let dir = AuthDir::new();
    let c = start(
        &dir,
        &issuer,
        &[
            ("OIDC_ROLES_CLAIM", "realm.groups"),
            ("OIDC_ROLE_MAP", "platform-admins=admin,devs=operator"),
        ],
    )
    .await;
    let person = |sub: &str, groups: Value| {
        let mut claims = issuer.claims(sub, AUD, Value::Null);
        claims["realm"] = json!({ "groups": groups });
        issuer.key().sign(&claims)
    };
    let admin = person("pat", json!(["staff", "platform-admins"]));
    let v = until_status(&c, &admin, 200, "a mapped admin accepted").await;
    assert_eq!(v["role"], "admin", "{v}");
    let (s, v) = whoami(&c, &person("dev", json!(["devs"]))).await;
    assert_eq!((s, v["role"].as_str()), (200, Some("operator")), "{v}");
    // With a map, only mapped values count: a group literally called `admin` grants nothing.
    let (s, v) = whoami(&c, &person("sly", json!(["admin"]))).await;
    assert_eq!(s, 403, "{v}");
}

/// `base` with `params` form-encoded as its query (also a form body: `.query()` of it).
fn with_params(base: &str, params: &[(&str, &str)]) -> reqwest::Url {
    reqwest::Url::parse_with_params(base, params).unwrap()
}

#[tokio::test]
async fn the_ui_sign_in_code_flow_yields_an_id_token_converge_accepts() {
    const CLIENT: &str = "converge-ui";
    let issuer = Issuer::start().await;
    let dir = AuthDir::new();
    let c = start(
        &dir,
        &issuer,
        &[("OIDC_CLIENT_ID", CLIENT), ("OIDC_AUDIENCE", CLIENT)],
    )
    .await;
    // The UI's callback route is served the SPA (the fallback), query and all.
    let r = c
        .client
        .get(format!("{}/oidc-callback?code=x&state=y", c.http))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{:?}",
        r.headers()
    );

    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect_uri = format!("{}/oidc-callback", c.http);
    let verifier = "a-pkce-verifier-of-more-than-43-characters-0123456789";
    let challenge = pkce_challenge(verifier);
    let authorize = |hint: Option<&str>| {
        let mut p = vec![
            ("response_type", "code"),
            ("client_id", CLIENT),
            ("redirect_uri", redirect_uri.as_str()),
            ("scope", "openid profile"),
            ("state", "st-1"),
            ("nonce", "n-1"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        p.extend(hint.map(|h| ("login_hint", h)));
        with_params(&format!("{}/authorize", issuer.url), &p)
    };
    // Without a login hint: the issuer's page naming who may sign in.
    let page = browser.get(authorize(None)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("Sign in as vera"), "{page}");
    // A plain (non-S256) challenge is refused.
    let plain = with_params(
        authorize(Some("vera")).as_str(),
        &[("code_challenge_method", "plain")],
    );
    assert_eq!(browser.get(plain).send().await.unwrap().status(), 400);

    // As vera: a redirect to the callback with a code and the state.
    let code = || async {
        let r = browser.get(authorize(Some("vera"))).send().await.unwrap();
        assert!(r.status().is_redirection(), "{}", r.status());
        let back = reqwest::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
        assert_eq!(back.path(), "/oidc-callback");
        let q: std::collections::HashMap<String, String> =
            back.query_pairs().into_owned().collect();
        assert_eq!(q.get("state").map(String::as_str), Some("st-1"));
        q["code"].clone()
    };
    let exchange = |code: String, verifier: &'static str, redirect: String, origin: String| {
        let browser = browser.clone();
        let url = format!("{}/token", issuer.url);
        async move {
            let body = with_params(
                "http://form/",
                &[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("redirect_uri", &redirect),
                    ("client_id", CLIENT),
                    ("code_verifier", verifier),
                ],
            );
            let r = browser
                .post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .header("origin", origin)
                .body(body.query().unwrap().to_string())
                .send()
                .await
                .unwrap();
            let allow = r
                .headers()
                .get("access-control-allow-origin")
                .map(|v| v.to_str().unwrap().to_string());
            (r.status().as_u16(), allow, r.json::<Value>().await.unwrap())
        }
    };
    let other = "http://elsewhere.example".to_string();
    // A wrong verifier is refused, and the code is spent by the attempt.
    let spent = code().await;
    let (s, _, v) = exchange(
        spent.clone(),
        "not-the-verifier-not-the-verifier-not-the-v",
        redirect_uri.clone(),
        c.http.clone(),
    )
    .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (400, Some("invalid_grant")),
        "{v}"
    );
    let (s, _, v) = exchange(spent, verifier, redirect_uri.clone(), c.http.clone()).await;
    assert_eq!(s, 400, "a used code: {v}");
    // Another redirect URI than the authorization request's is refused.
    let (s, _, v) = exchange(
        code().await,
        verifier,
        format!("{}/elsewhere", c.http),
        c.http.clone(),
    )
    .await;
    assert_eq!(s, 400, "{v}");

    // The right verifier: tokens, readable cross-origin by the UI's origin only.
    let (s, allow, v) =
        exchange(code().await, verifier, redirect_uri.clone(), c.http.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(allow.as_deref(), Some(c.http.as_str()));
    assert_eq!(
        (v["token_type"].as_str(), v["expires_in"].as_u64()),
        (Some("Bearer"), Some(600)),
        "{v}"
    );
    let access_token = v["access_token"].as_str().unwrap().to_string();
    let id_token = v["id_token"].as_str().unwrap().to_string();
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(id_token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            claims["aud"].as_str(),
            claims["nonce"].as_str(),
            claims["iss"].as_str()
        ),
        (Some(CLIENT), Some("n-1"), Some(issuer.url.as_str())),
        "{claims}"
    );
    let (_, allow, _) = exchange(code().await, verifier, redirect_uri.clone(), other.clone()).await;
    assert_eq!(allow, None, "a foreign origin may not read the answer");
    let pre = browser
        .request(Method::OPTIONS, format!("{}/token", issuer.url))
        .header("origin", c.http.as_str())
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(
        pre.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap()),
        Some(c.http.as_str())
    );

    // converge takes the ID token: vera, a viewer.
    let v = until_status(&c, &id_token, 200, "the ID token accepted").await;
    assert_eq!(
        (v["name"].as_str(), v["role"].as_str()),
        (Some("oidc:vera"), Some("viewer")),
        "{v}"
    );
    // The opaque access token is no bearer converge knows: the UI sends the ID token.
    let (s, _) = whoami(&c, &access_token).await;
    assert_eq!(s, 401);
}

/// Reads the stream until its text holds `needle`; fails if it ends first or after [`T`].
async fn read_until(s: &mut Chunks, needle: &str) {
    use futures::StreamExt;
    let mut seen = String::new();
    tokio::time::timeout(T, async {
        while let Some(Ok(chunk)) = s.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(needle) {
                return;
            }
        }
        panic!("the watch ended before {needle:?} came: {seen}");
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} on the watch within {T:?}"));
}
