"""The status page and Swagger UI in a real browser (headless Chromium from Debian, driven by
selenium with the system's chromedriver): every model of examples/models appears, figures
move while a load runs and fall back when it stops, the page's buttons unload and load a
model in explicit mode, and /v2/docs renders the API. A screenshot of the page is kept in
the test's tmp dir (pytest keeps the last runs' under its basetemp)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from http_servers import MODELS, start_server, write_repository

from naiad.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the core's test extra has it)")
pytest.importorskip("onnx")
pytest.importorskip("naiad_backend_onnx")
pytest.importorskip("naiad_backend_python")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("no browser: install Debian's chromium and chromium-driver (.ci/run does)", allow_module_level=True)

pytestmark = pytest.mark.slow
WAIT_S = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("browser") / "models"
    shutil.copytree(ROOT / "examples" / "models", repo)
    subprocess.run([sys.executable, str(ROOT / "examples" / "build_models.py"), "--repository", str(repo)], check=True)
    with ServerProcess(repo, "--model-control-mode", "explicit", "--load-model", "*") as process:
        process.models = sorted(p.name for p in repo.iterdir())
        yield process


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,900",
    ):
        options.add_argument(argument)
    # The system's driver: selenium must not look for (download) one of its own.
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def cell(browser, model, column):
    """A cell's text, read in one step (the page rewrites its cells every second)."""
    selector = f'tr[data-model="{model}"] td.{column}'
    return browser.execute_script(
        "const c = document.querySelector(arguments[0]); return c && c.textContent;", selector
    )


def click(browser, selector):
    """A real click on the element, found again should a refresh replace it meanwhile."""

    def attempt():
        try:
            browser.find_element(By.CSS_SELECTOR, selector).click()
            return True
        except StaleElementReferenceException:
            return False

    wait_for(browser, attempt, f"a click on {selector}")


def wait_for(browser, condition, what):
    return WebDriverWait(browser, WAIT_S, poll_frequency=0.2).until(lambda _: condition(), message=what)


def add_sub_load(url, stop):
    client = httpclient.InferenceServerClient(url)
    a = np.ones((1, 4), np.float32)
    inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a)
    while not stop.is_set():
        client.infer("add_sub", inputs)


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def test_status_page_shows_live_figures_and_controls_models(server, browser, tmp_path):
    browser.get(f"http://{server.http_url}/")
    wait_for(
        browser,
        lambda: len(browser.find_elements(By.CSS_SELECTOR, "#models tbody tr")) == len(server.models),
        "every model listed",
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "#models tbody tr")
    assert sorted(row.get_attribute("data-model") for row in rows) == server.models
    assert all(cell(browser, m, "state").startswith("READY") for m in server.models)
    assert browser.find_element(By.ID, "workers").text == "1"
    assert browser.find_element(By.ID, "control-mode").text == "explicit"

    stop = threading.Event()
    load = threading.Thread(target=add_sub_load, args=(server.http_url, stop), daemon=True)
    load.start()
    try:
        wait_for(
            browser, lambda: (number(cell(browser, "add_sub", "rps")) or 0) > 5, "requests/s of add_sub under load"
        )
        wait_for(browser, lambda: cell(browser, "add_sub", "p99").endswith("s"), "p99 of add_sub under load")
        assert cell(browser, "add_sub", "p50").endswith(("µs", "ms"))
        assert cell(browser, "add_sub", "busy").endswith("of 1")
        assert cell(browser, "add_sub", "batches").startswith("1: ")
        # A model nobody calls shows no rate.
        assert number(cell(browser, "classifier_onnx", "rps")) in (None, 0.0)
        uptime = browser.find_element(By.ID, "uptime").text
        wait_for(browser, lambda: browser.find_element(By.ID, "uptime").text != uptime, "the uptime moves")
        browser.save_screenshot(str(tmp_path / "status-page.png"))
    finally:
        stop.set()
        load.join(timeout=30)
    wait_for(
        browser, lambda: number(cell(browser, "add_sub", "rps")) == 0.0, "requests/s back to 0 once the load stops"
    )
    assert (tmp_path / "status-page.png").stat().st_size > 10_000

    # Explicit mode: unload and load again with the page's buttons.
    assert cell(browser, "classifier_onnx", "actions") == "unload"
    click(browser, 'tr[data-model="classifier_onnx"] button[data-action="unload"]')
    wait_for(
        browser, lambda: cell(browser, "classifier_onnx", "state").startswith("UNAVAILABLE"), "classifier_onnx unloaded"
    )
    assert browser.find_element(By.ID, "message").text == "unloaded classifier_onnx"
    client = httpclient.InferenceServerClient(server.http_url)
    assert not client.is_model_ready("classifier_onnx")
    assert cell(browser, "classifier_onnx", "actions") == "load"
    click(browser, 'tr[data-model="classifier_onnx"] button[data-action="load"]')
    wait_for(
        browser, lambda: cell(browser, "classifier_onnx", "state").startswith("READY"), "classifier_onnx loaded again"
    )
    assert client.is_model_ready("classifier_onnx")
    browser.save_screenshot(str(tmp_path / "status-page-after-reload.png"))


def test_api_docs_render(server, browser):
    browser.get(f"http://{server.http_url}/v2/docs")
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"), "Swagger UI's title")
    assert browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text.startswith("naiad")
    paths = {e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert "/v2/models/{model}/infer" in {p.replace("\u200b", "") for p in paths}


def test_restricted_repository_api_refuses_the_buttons(browser, tmp_path):
    # The buttons send the repository API's own request: a server that restricts it refuses
    # them as it refuses any client without the header, and the page says why.
    repo = write_repository(tmp_path / "models", {"add_sub": MODELS["add_sub"]})
    flags = ("--model-control-mode", "explicit", "--load-model", "add_sub")
    with start_server(repo, *flags, "--http-restricted-api", "model-repository:admin-key=secret") as server:
        browser.get(f"http://{server.http_url}/")
        wait_for(browser, lambda: cell(browser, "add_sub", "actions") == "unload", "the unload button")
        click(browser, 'tr[data-model="add_sub"] button[data-action="unload"]')
        wait_for(browser, lambda: "failed" in browser.find_element(By.ID, "message").text, "the refusal")
        assert browser.find_element(By.ID, "message").text == (
            "unload add_sub failed: This API is restricted, expecting header 'admin-key'"
        )
        assert httpclient.InferenceServerClient(server.http_url).is_model_ready("add_sub")
