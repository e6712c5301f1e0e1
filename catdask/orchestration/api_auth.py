"""The credential of the Prefect API that ``catdask serve`` starts (as Jupyter's token).

Whoever can call that API starts runs, so serve never leaves it open: it uses Prefect's
``PREFECT_SERVER_API_AUTH_STRING`` (``user:password``), or generates one
(:func:`serve_api_auth`) and prints it with the UI address. Beyond loopback a configured one is
required (:func:`api_auth_for_bind`): a generated one changes at every start.
"""

from __future__ import annotations

import ipaddress
import secrets

from ..errors import CatdaskError

__all__ = ["UnauthenticatedBindError", "AuthStringError", "is_loopback", "api_auth_for_bind",
           "serve_api_auth", "GENERATED_USER"]

#: The user name of a generated credential (its password is 32 random URL-safe characters).
GENERATED_USER = "catdask"


class UnauthenticatedBindError(CatdaskError, ValueError):
    """``serve --host`` beyond loopback without Prefect API authentication configured."""


class AuthStringError(CatdaskError, ValueError):
    """A configured API credential that is not ``user:password`` with both parts non-empty."""


def is_loopback(host) -> bool:
    """Whether ``host`` names this machine's loopback only (127.0.0.0/8, ::1, localhost)."""
    host = str(host).strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def _configured_auth_string():
    from prefect.settings import get_current_settings

    secret = get_current_settings().server.api.auth_string
    value = secret.get_secret_value() if secret is not None else None
    if value in (None, ""):
        return None
    user, colon, password = value.partition(":")
    if not (colon and user.strip() and password.strip()):
        raise AuthStringError(
            "PREFECT_SERVER_API_AUTH_STRING must be 'user:password' with a non-empty user and "
            "password (it is the Prefect API's HTTP basic credential); unset it to let "
            "`catdask serve` generate one")
    return value


def api_auth_for_bind(host):
    """The configured auth string of the served Prefect API (None when none is), checked against
    ``host``: beyond loopback ``PREFECT_SERVER_API_AUTH_STRING`` must be set (environment or Prefect
    profile), else :class:`UnauthenticatedBindError`; a string without a user or a password raises
    :class:`AuthStringError`.
    """
    value = _configured_auth_string()
    if not value and not is_loopback(host):
        raise UnauthenticatedBindError(
            f"refusing to serve the Prefect API on {host}: beyond 127.0.0.1 it needs "
            "authentication. Set PREFECT_SERVER_API_AUTH_STRING='user:password' (and "
            "PREFECT_API_AUTH_STRING to the same for clients), or bind 127.0.0.1 and use an "
            "SSH tunnel")
    return value


def serve_api_auth(host):
    """``(auth_string, generated)``: the configured credential (:func:`api_auth_for_bind`),
    else a new random one for this start of serve (``generated`` True)."""
    configured = api_auth_for_bind(host)
    if configured:
        return configured, False
    return f"{GENERATED_USER}:{secrets.token_urlsafe(24)}", True
