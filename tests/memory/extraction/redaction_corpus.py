"""A labelled corpus for the redaction gate (seed 002 ADR-005 calibration).

SECRETS: realistic tool-output snippets, each holding a synthetic secret of one family, with
the substrings that must not survive redaction. LOOKALIKES: non-secret strings that resemble
secrets (git SHAs, UUIDs, base64 images, long identifiers, lock-file hashes, ...). Every
secret is generated here from a fixed seed: none is a real credential.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_rng = random.Random(20260218)
BASE62 = string.ascii_letters + string.digits
BASE64 = BASE62 + "+/"
HEX = "0123456789abcdef"


def rand(alphabet: str, length: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(length))


def b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class SecretSample:
    family: str
    text: str
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class Lookalike:
    kind: str
    text: str


def _pem_body(lines: int = 8) -> list[str]:
    return [rand(BASE64, 64) for _ in range(lines)] + [rand(BASE64, 20) + "=="]


def _pem(kind: str) -> tuple[str, tuple[str, ...]]:
    body = _pem_body()
    label = f"{kind}PRIVATE KEY"
    block = "\n".join([f"-----BEGIN {label}-----", *body, f"-----END {label}-----"])
    return block, tuple(body)


def _jwt() -> str:
    header = b64url({"alg": "HS256", "typ": "JWT"})
    payload = b64url({"sub": rand(BASE62, 12), "iat": _rng.randint(10**9, 2 * 10**9)})
    return f"{header}.{payload}.{rand(BASE62 + '-_', 43)}"


def _gcp_json(compact: bool) -> tuple[str, tuple[str, ...]]:
    body = _pem_body(6)
    key_id = rand(HEX, 40)
    document = {
        "type": "service_account",
        "project_id": "demo-project-123",
        "private_key_id": key_id,
        "private_key": "-----BEGIN PRIVATE KEY-----\n"
        + "\n".join(body)
        + "\n-----END PRIVATE KEY-----\n",
        "client_email": "svc-runner@demo-project-123.iam.gserviceaccount.com",
        "client_id": str(_rng.randint(10**20, 10**21)),
    }
    text = json.dumps(document) if compact else json.dumps(document, indent=2)
    return text, (key_id, *body)


def _secrets() -> list[SecretSample]:
    samples: list[SecretSample] = []

    def add(family: str, text: str, *secrets: str) -> None:
        samples.append(SecretSample(family, text, tuple(secrets)))

    # Bearer tokens
    for template in (
        "Authorization: Bearer {t}",
        'curl -s -H "Authorization: Bearer {t}" https://api.example.com/v1/items',
        '{{"headers": {{"Authorization": "Bearer {t}"}}}}',
        "> authorization: bearer {t}\n< HTTP/1.1 200 OK",
        "export AUTH_HEADER='Bearer {t}'",
        "requests.get(url, headers={{'Authorization': 'Bearer {t}'}})",
    ):
        token = rand(BASE62, _rng.randint(20, 48))
        add("bearer_token", template.format(t=token), token)
    token = "ya29.a0" + rand(BASE62 + "-_", 60)
    add("bearer_token", f"Authorization: Bearer {token}", token)

    # PEM private keys
    for kind in ("RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED ", "DSA "):
        block, body = _pem(kind)
        add("pem_private_key", f"$ cat ~/.ssh/id_key\n{block}\n$ ", *body)

    # AWS keys
    for template in (
        "AWS_ACCESS_KEY_ID={k}",
        "[default]\naws_access_key_id = {k}\nregion = eu-west-1",
        '{{"AccessKeyId": "{k}", "Expiration": "2030-01-01T00:00:00Z"}}',
        "Using credentials {k} from the environment",
    ):
        key = _rng.choice(("AKIA", "ASIA")) + rand(string.ascii_uppercase + string.digits, 16)
        add("aws_key", template.format(k=key), key)
    for template in (
        "aws_secret_access_key = {s}",
        "AWS_SECRET_ACCESS_KEY={s}",
        '{{"SecretAccessKey": "{s}", "SessionToken": "x"}}',
    ):
        secret = rand(BASE64, 40)
        add("aws_key", template.format(s=secret), secret)

    # GCP service accounts
    for compact in (False, True, False):
        text, secrets = _gcp_json(compact)
        add("gcp_service_account", f"$ cat credentials.json\n{text}", *secrets)
    marker = '"service_account"'
    add("gcp_service_account", '{"type" : "service_account", "project_id": "p"}', marker)
    add("gcp_service_account", "'type': 'x'; \"TYPE\":\"SERVICE_ACCOUNT\"", marker.upper())

    # E-mails
    for address in (
        "jane.doe@example.com",
        "ops+alerts@corp.example.io",
        "first_last@mail.example.co.uk",
        "dev-team@sub-domain.example.org",
        "x.y.z@example.dev",
    ):
        add("email", f"commit 1a2b\nAuthor: Someone <{address}>\nDate: today", address)
    add("email", "Contact: support@example.net for help", "support@example.net")
    add("email", '{"user": {"email": "a.b@example.com"}}', "a.b@example.com")

    # URLs with credentials
    for url, secret in (
        ("postgresql://app:{p}@db.internal:5432/app", "{p}"),
        ("mysql://root:{p}@127.0.0.1:3306/shop", "{p}"),
        ("https://deploy:{p}@git.example.com/org/repo.git", "{p}"),
        ("redis://:{p}@cache.internal:6379/0", "{p}"),
        ("amqp://guest:{p}@rabbit:5672/", "{p}"),
        ("mongodb+srv://admin:{p}@cluster0.abcde.mongodb.net/test", "{p}"),
        ("ftp://backup:{p}@files.example.com/dump.tgz", "{p}"),
    ):
        password = rand(BASE62, 14)
        add(
            "url_credentials",
            "DATABASE_URL=" + url.format(p=password),
            secret.format(p=password),
        )

    # JWTs
    for template in (
        '{{"id_token": "{j}", "expires_in": 3600}}',
        "Set-Cookie: session={j}; HttpOnly; Secure",
        "token={j}",
        "JWT: {j}",
        "decoded from {j} ok",
        "<input type='hidden' value='{j}'>",
    ):
        jwt = _jwt()
        add("jwt", template.format(j=jwt), jwt.rsplit(".", 1)[1])

    # Generic high-entropy tokens (>= 40 characters)
    for template, token in (
        ("GITHUB_TOKEN=ghp_{r}", "ghp_" + rand(BASE62, 36)),
        ("token: github_pat_{r}", "github_pat_" + rand(BASE62, 22) + "_" + rand(BASE62, 59)),
        ("OPENAI_API_KEY=sk-proj-{r}", "sk-proj-" + rand(BASE62 + "-_", 48)),
        (
            "SLACK_BOT_TOKEN=xoxb-{r}",
            f"xoxb-{rand(string.digits, 11)}-{rand(string.digits, 13)}-{rand(BASE62, 24)}",
        ),
        ("npm config set //registry.npmjs.org/:_authToken npm_{r}", "npm_" + rand(BASE62, 36)),
        ("api_key = '{r}'", rand(BASE62, 40)),
        ('"secret": "{r}"', rand(BASE64, 44) + "="),
        ("SECRET_KEY_BASE={r}", rand(BASE62, 64)),
        ("x-api-key: {r}", rand(BASE62 + "_-", 56)),
        ("glpat-{r} is the GitLab token", "glpat-" + rand(BASE62, 20) + rand(BASE62, 20)),
    ):
        add("generic_token", _render(template, token), _secret_part(token))
    return samples


def _render(template: str, token: str) -> str:
    """Put the whole token where the template has {r}, dropping a prefix the template has."""
    prefix = template.split("{r}", 1)[0]
    for known in ("ghp_", "github_pat_", "sk-proj-", "xoxb-", "npm_", "glpat-"):
        if prefix.endswith(known) and token.startswith(known):
            return template.replace("{r}", token[len(known) :])
    return template.replace("{r}", token)


def _secret_part(token: str) -> str:
    """The random tail of a token: what must not survive."""
    return token[-24:]


def _lookalikes() -> list[Lookalike]:
    items: list[Lookalike] = []

    def add(kind: str, text: str) -> None:
        items.append(Lookalike(kind, text))

    for _ in range(6):
        sha = rand(HEX, 40)
        add("git sha", f"commit {sha}\nMerge: {sha[:7]} {rand(HEX, 7)}")
    add("git sha", f"{rand(HEX, 40)} refs/heads/main\n{rand(HEX, 40)} refs/tags/v1.2.0")
    add("sha256 digest", f"{rand(HEX, 64)}  dist/gql_memory-0.1.0.tar.gz")
    add("docker digest", f"image@sha256:{rand(HEX, 64)}")
    for _ in range(4):
        u = "-".join(rand(HEX, n) for n in (8, 4, 4, 4, 12))
        add("uuid", f"request {u} finished in 12 ms")
    add("uuid", "trace_id=" + "-".join(rand(HEX, n) for n in (8, 4, 4, 4, 12)) + "_retry")
    add("uuid", "ids: " + ",".join("-".join(rand(HEX, n) for n in (8, 4, 4, 4, 12)) for _ in "ab"))
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + _rng.randbytes(120)).decode()
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + _rng.randbytes(120)).decode()
    gif = base64.b64encode(b"GIF89a" + _rng.randbytes(90)).decode()
    add("base64 image", f"![chart](data:image/png;base64,{png})")
    add("base64 image", f'<img src="data:image/jpeg;base64,{jpeg}">')
    add("base64 image", f'{{"thumbnail": "{png}"}}')
    add("base64 image", f"background: url(data:image/gif;base64,{gif});")
    add("base64 image", f'{{"image/jpeg": "{jpeg}"}}')
    for identifier in (
        "test_all_critical_items_force_evicts_the_oldest_one",
        "AbstractSingletonProxyFactoryBeanConfigurationManager",
        "get_user_account_settings_by_organization_identifier_v2",
        "com_example_service_internal_persistence_RepositoryImpl",
        "REACT_APP_FEATURE_FLAG_ENABLE_EXPERIMENTAL_DASHBOARD_WIDGETS",
        "kube-system-coredns-autoscaler-configuration-override-map",
        "io.grpc.netty.shaded.io.netty.handler.codec.http2.Http2ConnectionHandler",
        "v1beta1ProjectsLocationsInstancesGetIamPolicyRequest",
    ):
        add("long identifier", f"def {identifier}(): pass")
    for path in (
        "/home/runner/work/gql_memory/gql_memory/tests/memory/test_extraction.py",
        "node_modules/@typescript-eslint/eslint-plugin/dist/rules/naming-convention.js",
        "/usr/lib/python3/dist-packages/setuptools/_vendor/packaging/requirements.py",
        "src/main/java/com/example/accounting/ledger/reconciliation/Service.java",
    ):
        add("path", f'  File "{path}", line 42, in <module>')
    add(
        "lock hash",
        f"integrity sha512-{base64.b64encode(_rng.randbytes(64)).decode()}",
    )
    add(
        "lock hash",
        f'"integrity": "sha1-{base64.b64encode(_rng.randbytes(20)).decode()}"',
    )
    add(
        "lock hash",
        f"resolution: {{integrity: sha512-{base64.b64encode(_rng.randbytes(64)).decode()}}}",
    )
    add(
        "lock hash",
        f"golang.org/x/net v0.25.0 h1:{base64.b64encode(_rng.randbytes(32)).decode()}",
    )
    add("lock hash", f'checksum = "{rand(HEX, 64)}"')
    add("lock hash", f'{{file = "pkg-1.0-py3-none-any.whl", hash = "sha256:{rand(HEX, 64)}"}}')
    add("lock hash", f'"narHash": "sha256-{base64.b64encode(_rng.randbytes(32)).decode()}"')
    add(
        "lock hash",
        f'resolved "https://registry.yarnpkg.com/x/-/x-1.0.0.tgz#{rand(HEX, 40)}"',
    )
    add("version pin", "added lodash@4.17.21 and @types/node@20.11.30 to package.json")
    add("url", "see https://example.com:8080/@someone/posts and https://github.com/org/repo")
    add("url", "git clone https://github.com/encode/starlette.git && cd starlette")
    add("prose", "The bearer of this letter is a friend; treat them well.")
    add("prose", "Tokens are validated at the gateway before the request reaches the API.")
    add("config", "JWT_ALGORITHM=HS256\nJWT_EXPIRY_SECONDS=3600\nAUTH_ENABLED=true")
    add("config", "aws_region = eu-west-1\naws_profile = staging")
    add("hex color", "colors: #ffffff #000000 #1e90ff #ff6347 #2e8b57 #daa520 #9932cc")
    add("timestamp", "2024-05-01T12:34:56.789012+00:00 INFO request served in 12.5ms")
    add("number", "order 12345678901234567890123456789012345678901234 confirmed")
    add("nix store", f"/nix/store/{rand('0123456789abcdfghijklmnpqrsvwxyz', 32)}-python3-3.11.9")
    add("k8s name", "pod/api-server-7d9f8b6c5d-x2x4z   1/1   Running   0   3d")
    add("ssh url", "remote: git+ssh://github.com/org/repo.git (fetch)")
    return items


SECRETS: list[SecretSample] = _secrets()
LOOKALIKES: list[Lookalike] = _lookalikes()
