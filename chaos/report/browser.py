"""Headless Chromium on a report page: its DOM as the browser built it, or a screenshot. The page
is opened from disk with the network off, so a figure that needed one would be missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from chaos.errors import KilocardError

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--proxy-server=127.0.0.1:9",
         "--proxy-bypass-list=<-loopback>")


def chromium(page: Path, *flags: str, timeout: float = 120) -> str:
    """Run Chromium (Debian's `chromium`, installed by ./bootstrap; or Chrome) on the page; its stdout."""
    exe = next((found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))),
               None)
    if exe is None:
        raise KilocardError("no chromium, chromium-browser or google-chrome (./bootstrap installs Debian's chromium)")
    done = subprocess.run([exe, *FLAGS, *flags, page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise KilocardError(f"chromium failed on {page}: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def dom(page: Path) -> str:
    return chromium(page, "--dump-dom")


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2600) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    chromium(page, f"--window-size={width},{height}", f"--screenshot={png.resolve()}")
    return png
