"""Screenshot the inspector: how docs/inspector.png is made.

    ctxstore demo --port 8000 &      # prints the inspector URL
    .venv/bin/python scripts/inspector_screenshot.py \\
        'http://127.0.0.1:8000/ui#session=SESSION' docs/inspector.png --item t15

Drives Debian's Chromium (``/usr/bin/chromium``) with Playwright, from the
test extras; ``--item`` clicks that item so the item panel explains it.
"""

from __future__ import annotations

import argparse
import time

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("out")
    parser.add_argument("--item", help="item id to click in the commit's items")
    parser.add_argument("--width", type=int, default=1440)
    parser.add_argument("--height", type=int, default=1180)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.goto(args.url)
        expect(page.locator("#live")).to_have_text("live")
        expect(page.locator("tr.item-row").first).to_be_visible()
        if args.item:
            page.locator(f"tr.item-row[data-item='{args.item}']").click()
            expect(page.get_by_test_id("explain")).to_be_visible()
            page.evaluate("window.scrollTo(0, 0)")
        time.sleep(0.3)  # let the last redraw settle
        page.screenshot(path=args.out)
        browser.close()


if __name__ == "__main__":
    main()
