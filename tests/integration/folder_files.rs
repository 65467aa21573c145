//! A folder's files over HTTP, on both databases: uploaded (streamed, refused past the
//! quota, the folder keeping what it held), listed, downloaded whole or by range, made,
//! moved and deleted; by whom the folder is for and as their access says; never through
//! `..` or a symbolic link a session made.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};

use crate::db_tests;
use crate::folders::{create, user_id};
use crate::support::{StorageDir, TestApp, declare_storage};

/// `method` on `/folders/{folder}/files/{path}` as `token`, with `body`: the status and the body.
async fn files(
    app: &TestApp,
    token: Option<&str>,
    method: Method,
    folder: &str,
    path: &str,
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    request(app, token, method, &format!("/folders/{folder}/files/{path}"), &[], body).await
}

async fn request(
    app: &TestApp,
    token: Option<&str>,
    method: Method,
    uri: &str,
    headers: &[(header::HeaderName, &str)],
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    for (name, value) in headers {
        req = req.header(name, *value);
    }
    let (status, _, body) = app.send(req.body(Body::from(body)).expect("a request")).await;
    (status, body)
}

/// The error's code, or its first problem's for bad input.
fn code(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let problem = v["error"]["problems"][0]["code"].as_str();
    problem.or(v["error"]["code"].as_str()).unwrap_or("").to_owned()
}

fn names(body: &[u8]) -> Vec<(String, String)> {
    let v: Value =
        serde_json::from_slice(body).unwrap_or_else(|_| panic!("a listing: {}", String::from_utf8_lossy(body)));
    v["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["name"].as_str().unwrap_or("").to_owned(), e["kind"].as_str().unwrap_or("").to_owned()))
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

async fn a_folders_files_are_uploaded_listed_downloaded_and_moved(app: TestApp) {
    let storage = StorageDir::new();
    declare_storage(&app, storage.path()).await;
    let images = sessiond::domain::storage::volume::images_here();
    let id_of =
        |r: &Value| r["data"]["createFolder"]["folder"]["id"].as_str().unwrap_or_else(|| panic!("{r}")).to_owned();
    let folder = id_of(&create(&app, "demo-alice", "data", "USER", Some(8 << 20)).await);
    let alice = Some("demo-alice");

    // Uploaded, then replaced; listed; downloaded whole and by range, as an attachment.
    assert_eq!(files(&app, alice, Method::PUT, &folder, "a.txt", b"hullo".to_vec()).await.0, StatusCode::CREATED);
    assert_eq!(files(&app, alice, Method::PUT, &folder, "a.txt", b"hello".to_vec()).await.0, StatusCode::OK);
    let (status, body) = files(&app, alice, Method::GET, &folder, "", Vec::new()).await;
    assert_eq!((status, names(&body)), (StatusCode::OK, vec![pair("a.txt", "file")]));
    let (status, body) = files(&app, alice, Method::GET, &folder, "a.txt", Vec::new()).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, b"hello".as_slice()));
    let mut req = Request::get(format!("/folders/{folder}/files/a.txt"))
        .header(header::AUTHORIZATION, "Bearer demo-alice")
        .header(header::RANGE, "bytes=1-3");
    req = req.header(header::ACCEPT, "*/*");
    let (status, headers, body) = app.send(req.body(Body::empty()).expect("a request")).await;
    assert_eq!((status, body.as_slice()), (StatusCode::PARTIAL_CONTENT, b"ell".as_slice()));
    assert_eq!(headers[header::CONTENT_RANGE], "bytes 1-3/5");
    assert_eq!(headers[header::CONTENT_DISPOSITION], "attachment; filename*=UTF-8''a.txt");
    assert_eq!(headers[header::CONTENT_SECURITY_POLICY], "sandbox");
    let range = [(header::RANGE, "bytes=9-")];
    let uri = format!("/folders/{folder}/files/a.txt");
    assert_eq!(request(&app, alice, Method::GET, &uri, &range, Vec::new()).await.0, StatusCode::RANGE_NOT_SATISFIABLE);

    // A directory made, a file moved into it; what is not there is 404.
    assert_eq!(
        request(&app, alice, Method::POST, &format!("/folders/{folder}/files/out?op=mkdir"), &[], Vec::new()).await.0,
        StatusCode::NO_CONTENT
    );
    let moved = format!("/folders/{folder}/files/a.txt?op=move&to=out/b.txt");
    assert_eq!(request(&app, alice, Method::POST, &moved, &[], Vec::new()).await.0, StatusCode::NO_CONTENT);
    let (_, body) = files(&app, alice, Method::GET, &folder, "out", Vec::new()).await;
    assert_eq!(names(&body), [pair("b.txt", "file")]);
    let (status, body) = files(&app, alice, Method::GET, &folder, "a.txt", Vec::new()).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND".to_owned()));

    // Never outside the folder: `..` is refused, a link a session made is not followed.
    for path in ["../x", "out/../../x", "%2e%2e/x"] {
        let (status, body) = files(&app, alice, Method::GET, &folder, path, Vec::new()).await;
        assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, "INVALID_PATH".to_owned()), "{path}");
    }
    let uuid = sessiond::graphql::ids::decode(&folder).map(|(_, u)| u).expect("a folder id");
    let outside = tempfile::tempdir().expect("a directory outside the folder");
    std::fs::write(outside.path().join("secret"), "s").expect("a file outside");
    std::os::unix::fs::symlink(outside.path(), storage.path().join(&uuid).join("etc"))
        .expect("a link, as a session would make");
    for path in ["etc/secret", "etc"] {
        let (status, body) = files(&app, alice, Method::GET, &folder, path, Vec::new()).await;
        assert!(
            status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND,
            "{path}: {status} {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (_, body) = files(&app, alice, Method::GET, &folder, "", Vec::new()).await;
    assert_eq!(names(&body), [pair("etc", "link"), pair("out", "directory")]);
    let (status, _) = files(&app, alice, Method::PUT, &folder, "etc/evil", b"x".to_vec()).await;
    assert!(status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND, "{status}");
    assert!(!outside.path().join("evil").exists(), "nothing written through the link");
    assert_eq!(files(&app, alice, Method::DELETE, &folder, "etc", Vec::new()).await.0, StatusCode::NO_CONTENT);
    assert!(outside.path().join("secret").exists(), "the link went, not what it named");

    // Past the quota an upload is refused, and the folder keeps what it held.
    if images {
        let big = vec![1u8; 12 << 20];
        let (status, body) = files(&app, alice, Method::PUT, &folder, "out/big.bin", big).await;
        assert_eq!((status, code(&body)), (StatusCode::INSUFFICIENT_STORAGE, "QUOTA_EXCEEDED".to_owned()));
        let (_, body) = files(&app, alice, Method::GET, &folder, "out", Vec::new()).await;
        assert_eq!(names(&body), [pair("b.txt", "file")], "nothing of the refused upload");
        let fits = vec![2u8; 4 << 20];
        assert_eq!(files(&app, alice, Method::PUT, &folder, "out/fits.bin", fits).await.0, StatusCode::CREATED);
    }

    // Someone else finds nothing; no token is 401.
    for (token, status) in [
        (Some("demo-bob"), StatusCode::NOT_FOUND),
        (Some("demo-admin"), StatusCode::NOT_FOUND),
        (None, StatusCode::UNAUTHORIZED),
    ] {
        assert_eq!(files(&app, token, Method::GET, &folder, "out/b.txt", Vec::new()).await.0, status, "{token:?}");
        assert_eq!(files(&app, token, Method::PUT, &folder, "x", b"x".to_vec()).await.0, status, "{token:?}");
    }

    // A project member has exactly the access granted.
    let team = id_of(&create(&app, "demo-admin", "team", "PROJECT", Some(8 << 20)).await);
    assert_eq!(
        files(&app, Some("demo-admin"), Method::PUT, &team, "notes", b"n".to_vec()).await.0,
        StatusCode::CREATED
    );
    let (status, body) = files(&app, alice, Method::GET, &team, "notes", Vec::new()).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, b"n".as_slice()));
    let (status, body) = files(&app, alice, Method::PUT, &team, "mine", b"m".to_vec()).await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN".to_owned()));
    let grant = "mutation($id: ID!, $u: ID!) { setFolderAccess(id: $id, userId: $u, access: READ_WRITE) { folder { access } } }";
    app.gql(Some("demo-admin"), grant, json!({"id": team, "u": user_id("alice@example.com")})).await;
    assert_eq!(files(&app, alice, Method::PUT, &team, "mine", b"m".to_vec()).await.0, StatusCode::CREATED);

    // A directory goes with what it holds.
    assert_eq!(files(&app, alice, Method::DELETE, &folder, "out", Vec::new()).await.0, StatusCode::NO_CONTENT);
    let (_, body) = files(&app, alice, Method::GET, &folder, "", Vec::new()).await;
    assert_eq!(names(&body), []);
}

db_tests!(a_folders_files_are_uploaded_listed_downloaded_and_moved);
