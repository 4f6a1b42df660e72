"""Print a one-line deb-src entry for SUITE on this machine's own Debian archive.

The archive's URI and signing key come from the machine's apt sources (deb822 ``.sources`` or
one-line ``.list``): the entry whose suites include this release's codename, not its security
archive. No address is written in the repository; apt checks the suite's signed Release file.
"""

from __future__ import annotations

import glob
import sys
from pathlib import Path


def codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    sys.exit("debsrc: /etc/os-release names no VERSION_CODENAME; set MOSQUITTO_SUITE on a Debian machine")


def entries() -> list[tuple[str, list[str], str]]:
    """(uri, suites, signed-by) of every deb entry in the apt sources."""
    found: list[tuple[str, list[str], str]] = []
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in Path(path).read_text().split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith(("#", " ")):
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes") != "no":
                found += [
                    (uri, fields.get("suites", "").split(), fields.get("signed-by", ""))
                    for uri in fields.get("uris", "").split()
                ]
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        if not Path(path).is_file():
            continue
        for line in Path(path).read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) >= 3 and words[0] == "deb":
                options = [w for w in words[1:] if w.startswith("[")]
                rest = [w for w in words[1:] if not w.startswith("[") and not w.endswith("]")]
                signed = next((o.split("=", 1)[1].rstrip("]") for o in options if "signed-by=" in o), "")
                found.append((rest[0], [rest[1]], signed))
    return found


def main() -> None:
    suite = sys.argv[1]
    release = codename()
    for uri, suites, signed_by in entries():
        if release in suites:
            options = f"[signed-by={signed_by}] " if signed_by else ""
            print(f"deb-src {options}{uri} {suite} main")
            return
    sys.exit(f"debsrc: no apt source lists the {release!r} suite; set MOSQUITTO_SUITE and add a deb-src entry")


if __name__ == "__main__":
    main()
