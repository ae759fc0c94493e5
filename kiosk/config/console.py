"""The staff console's section (``console.*``): a small web app for a phone or tablet on the booth
network, served by the kiosk in a child process of its own (:mod:`kiosk.console`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from kiosk.config.sections import Section, default_allow, host_port, networks

#: The console's port unless ``console.listen`` says otherwise (the keepsake server's is 8088).
CONSOLE_PORT = 8089
#: The shortest PIN accepted.
MIN_PIN_CHARS = 4


class ConsoleConfig(Section):
    enabled: bool = Field(
        False,
        description="Serve the staff console (status, counters, controls) on the booth network; it needs "
        "console.pin or console.pin_file (without, it does not start and says so). Off: no console, no port.",
    )
    listen: str = Field(
        f"0.0.0.0:{CONSOLE_PORT}",
        description="Address and port the staff console listens on (0.0.0.0: every interface).",
    )
    pin: str | None = Field(
        None,
        repr=False,
        description=f"The staff PIN or passphrase (at least {MIN_PIN_CHARS} characters; never written to "
        "the log); prefer console.pin_file.",
    )
    pin_file: str | None = Field(
        None,
        description="A file holding the staff PIN (its first line, relative to the config file; mode "
        "0600); used when console.pin is null.",
    )
    allow: list[str] = Field(
        default_factory=default_allow,
        description="Networks (CIDR) whose devices may reach the console: the booth LAN. The server closes "
        "connections from any other address (this machine excepted), and the systemd unit's "
        "IPAddressAllow= drops their packets.",
    )

    @field_validator("listen", mode="before")
    @classmethod
    def _listen(cls, v: Any) -> Any:
        host_port(str(v) if isinstance(v, int | str) and not isinstance(v, bool) else "?", CONSOLE_PORT)
        return v

    @field_validator("pin")
    @classmethod
    def _pin(cls, v: str | None) -> str | None:
        if v is not None and len(v.strip()) < MIN_PIN_CHARS:
            raise ValueError(f"is shorter than {MIN_PIN_CHARS} characters; choose a longer PIN")
        return v.strip() if v is not None else v

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: list[str]) -> list[str]:
        return networks(v, "device could reach the console")

    def listen_host_port(self) -> tuple[str, int]:
        """``listen`` split into (host, port)."""
        return host_port(self.listen, CONSOLE_PORT)
