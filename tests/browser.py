"""Headless Chromium driven through the DevTools protocol: enough to wait, click and screenshot.

Debian's chromium, started with --headless --no-sandbox --disable-gpu
--disable-background-networking and a fresh profile; nothing is downloaded.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest


class Browser:
    def __init__(self, profile: Path, size: str = "1900,1000"):
        from websockets.sync.client import connect

        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            pytest.fail(
                "chromium not found: scripts/setup installs Debian's chromium package (apt-get install chromium)"
            )
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                f"--window-size={size}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline:
                pytest.fail("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=50_000_000)
        self._id = 0
        self.call("Page.enable")

    def call(self, method: str, **params) -> dict:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                return message.get("result", message)

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def wait_for(self, expression: str, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.js(expression):
                return True
            time.sleep(0.3)
        return False

    def click(self, selector_expression: str) -> bool:
        """A real mouse click at the element's centre (menus that listen to pointer events need one)."""
        box = self.js(
            f"(() => {{ const e = {selector_expression}; if (!e) return null; e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if not box:
            return False
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)
        return True

    def drag(self, start: list[float], end: list[float], steps: int = 8) -> None:
        """Press the left button at ``start``, move to ``end`` in steps, release: a real text selection."""
        self.call(
            "Input.dispatchMouseEvent",
            type="mousePressed",
            x=start[0],
            y=start[1],
            button="left",
            clickCount=1,
        )
        for i in range(1, steps + 1):
            x = start[0] + (end[0] - start[0]) * i / steps
            y = start[1] + (end[1] - start[1]) * i / steps
            self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y, button="left", buttons=1)
        self.call(
            "Input.dispatchMouseEvent", type="mouseReleased", x=end[0], y=end[1], button="left", clickCount=1
        )

    def press(self, key: str) -> None:
        """One key, down and up, as the keyboard sends it (a character, or "Enter")."""
        if key == "Enter":
            fields = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"}
        else:
            fields = {"key": key, "text": key, "windowsVirtualKeyCode": ord(key.upper())}
        self.call("Input.dispatchKeyEvent", type="keyDown", **fields)
        self.call("Input.dispatchKeyEvent", type="keyUp", **{k: v for k, v in fields.items() if k != "text"})

    def type_text(self, text: str) -> None:
        """Text typed into the focused element (an IME-style insert: input events fire)."""
        self.call("Input.insertText", text=text)

    def reload(self) -> None:
        self.call("Page.reload", ignoreCache=True)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)
