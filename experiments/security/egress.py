"""Where the server may connect on a user's behalf (webhooks): public unicast addresses only, checked at save
and at every send against the very address connected to."""

import ipaddress
import socket
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ReadTimeoutError, SSLError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Not caught by `is_global` in every supported Python, or deprecated transition ranges.
_ALSO_BLOCKED = [ipaddress.ip_network(net) for net in (
    "192.88.99.0/24",  # 6to4 relay anycast
    "64:ff9b:1::/48",  # local-use NAT64
    "::/96",  # IPv4-compatible (deprecated): ::127.0.0.1
    "100.64.0.0/10",  # CGNAT, explicitly (older Pythons)
)]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# The resolver; a test swaps it to play a DNS answer that changes between save and send.
getaddrinfo = socket.getaddrinfo


class EgressBlocked(Exception):
    """The destination is not one the server may call; str(exc) says so without saying what it
    resolved to (an answer about internal names would be a map of the network)."""


class SendFailed(Exception):
    """A call that did not get an HTTP answer; str(exc) is one fixed class (never a banner, a
    reason phrase or a body): "Could not connect", "Timed out" or "TLS error"."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def allowed_networks() -> list:
    return settings.WEBHOOK_ALLOWED_NETWORKS


def address_allowed(ip: Address) -> bool:
    """Public unicast, or inside a network the deployment allows."""
    candidates = [ip]
    if ip.version == 6 and (inner := _embedded_ipv4(ip)) is not None:
        candidates.append(inner)
    if any(c in net for c in candidates for net in allowed_networks() if c.version == net.version):
        return True
    target = candidates[-1]
    return (target.is_global and not target.is_multicast and not target.is_unspecified
            and not any(target in net for net in _ALSO_BLOCKED if net.version == target.version))


def _resolve(host: str, port: int) -> list[Address]:
    try:
        infos = getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    seen: list[Address] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if ip not in seen:
            seen.append(ip)
    return seen


def _port(parts) -> int:
    try:
        port = parts.port
    except ValueError:
        port = None
    return port or (443 if parts.scheme == "https" else 80)


def destination(url: str) -> tuple[str, int, Address]:
    """The host, port and the address to connect to; EgressBlocked unless every address the host
    resolves to is allowed (a name with one private answer among public ones is refused: which
    one a client would pick is not ours to know)."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise EgressBlocked("Put no user name or password in a webhook URL: the team page and the audit log show "
                            "its host, and the receiver can check the X-Tuneboard-Signature made with the secret.")
    host = parts.hostname or ""
    port = _port(parts)
    addresses = _resolve(host, port) if host else []
    if not addresses or not all(address_allowed(ip) for ip in addresses):
        raise EgressBlocked(f"Webhooks may only call public addresses, and {host or 'this URL'} is not one (or "
                            "does not resolve from the server). An administrator can allow an internal receiver "
                            "with TUNEBOARD_WEBHOOK_ALLOWED_NETWORKS.")
    return host, port, addresses[0]


def post(url: str, *, body: bytes, headers: dict, timeout: float) -> int:
    """POST to `url` at the address the policy checked; the HTTP status, or SendFailed /
    EgressBlocked. Redirects are answers (not followed); the answer's body is never read."""
    host, port, ip = destination(url)
    parts = urlsplit(url)
    https = parts.scheme == "https"
    tls = {"server_hostname": host, "assert_hostname": host, "cert_reqs": "CERT_REQUIRED"} if https else {}
    pool_class = urllib3.HTTPSConnectionPool if https else urllib3.HTTPConnectionPool
    pool = pool_class(str(ip), port, timeout=urllib3.Timeout(connect=timeout, read=timeout), retries=False,
                      maxsize=1, **tls)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    netloc = parts.netloc.rpartition("@")[2]
    try:
        response = pool.urlopen("POST", target, body=body, headers={**headers, "Host": netloc}, redirect=False,
                                retries=False, preload_content=False, assert_same_host=False)
        status = response.status
        response.close()
        return status
    except NewConnectionError:  # refused or unreachable (urllib3 makes it a kind of ConnectTimeoutError)
        raise SendFailed("Could not connect") from None
    except (ConnectTimeoutError, ReadTimeoutError, TimeoutError):
        raise SendFailed("Timed out") from None
    except SSLError:
        raise SendFailed("TLS error") from None
    except (urllib3.exceptions.HTTPError, OSError):
        raise SendFailed("Could not connect") from None
    finally:
        pool.close()

