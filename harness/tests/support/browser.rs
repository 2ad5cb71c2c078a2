//! Pages as a reader sees them. Headless Chromium renders a copy of a page in a 1,400 px window,
//! with a script added that measures it: the page scrolls sideways, a table runs past the
//! window, a box scrolls its content, a picture's text spills outside it or covers other text.
//! The checks are on what the browser laid out, in its fonts, not on the HTML.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;

/// The window's width: a laptop's browser, the width issue reports are read at.
pub(crate) const WINDOW_PX: u32 = 1_400;

/// Collects what a reader would see cut, scrolled or covered, as base64 JSON in the title
/// (the one thing `--dump-dom` prints that no page text can be confused with).
const MEASURE: &str = r#"<script>(() => {
  const box = e => e.getBoundingClientRect();
  const doc = document.documentElement;
  const out = { window: innerWidth, scroll: doc.scrollWidth, client: doc.clientWidth,
                tables: [], scrollers: [], figures: [] };
  for (const t of document.querySelectorAll('table')) {
    out.tables.push({ right: box(t).right, first: (t.rows[0] ? t.rows[0].innerText : '').slice(0, 60) });
  }
  for (const el of document.querySelectorAll('body *')) {
    const s = getComputedStyle(el);
    if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && el.scrollWidth > el.clientWidth + 1) {
      out.scrollers.push(el.tagName + ' ' + (el.id || el.className));
    }
  }
  for (const svg of document.querySelectorAll('svg')) {
    const b = box(svg);
    const texts = [...svg.querySelectorAll('text')]
      .filter(t => t.textContent.trim() !== '')
      .map(t => ({ s: t.textContent, b: box(t) }));
    const outside = texts.filter(t => t.b.left < b.left - 1 || t.b.right > b.right + 1 ||
                                      t.b.top < b.top - 1 || t.b.bottom > b.bottom + 1).map(t => t.s);
    const covered = [];
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i].b, c = texts[j].b;
        const w = Math.min(a.right, c.right) - Math.max(a.left, c.left);
        const h = Math.min(a.bottom, c.bottom) - Math.max(a.top, c.top);
        // Glyph boxes include the line's leading: rows of text 2 px into each other still read.
        if (w > 1 && h > 2) covered.push([texts[i].s, texts[j].s]);
      }
    }
    out.figures.push({ title: texts.length ? texts[0].s : '', width: b.width, texts: texts.length, outside, covered });
  }
  document.title = btoa(unescape(encodeURIComponent(JSON.stringify(out))));
})();</script>"#;

/// Chromium, from `FAILMODE_CHROMIUM` or the PATH (`just setup` installs Debian's).
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("FAILMODE_CHROMIUM") {
        return path.into();
    }
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
        .iter()
        .find_map(|name| which(name))
        .expect("headless Chromium is needed to check the pages as rendered: `just setup` installs Debian's chromium (or set FAILMODE_CHROMIUM)")
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `html` rendered at [`WINDOW_PX`] and measured.
fn measure(html: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.html");
    let with_script = match html.rfind("</body>") {
        Some(at) => format!("{}{MEASURE}{}", &html[..at], &html[at..]),
        None => format!("{html}{MEASURE}"),
    };
    std::fs::write(&page, with_script).unwrap();
    let dom = render(&page, dir.path());
    let title = dom
        .split_once("<title>")
        .and_then(|(_, rest)| rest.split_once("</title>"))
        .map(|(t, _)| t)
        .unwrap_or_else(|| panic!("no <title> in Chromium's DOM: {dom:.400}"));
    let json = base64::engine::general_purpose::STANDARD
        .decode(title.trim())
        .unwrap_or_else(|e| panic!("the measuring script did not run ({e}): title {title:.200}"));
    serde_json::from_slice(&json).unwrap()
}

/// Chromium's DOM of `page` after its scripts ran. Chromium gets its own profile folder (tests
/// running at once do not share one) and its own process group, which is ended whole when it
/// is done or late, so no renderer outlives the test; its output goes to files, which no
/// leftover child can hold open as it could a pipe.
fn render(page: &Path, dir: &Path) -> String {
    let (out, err) = (dir.join("dom.html"), dir.join("chromium.log"));
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            &format!("--user-data-dir={}", dir.join("profile").display()),
            &format!("--window-size={WINDOW_PX},1000"),
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The whole group, by its id (the leader's pid): `kill` rather than a signal call of our
    // own, which would need `unsafe`.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let log = || std::fs::read_to_string(&err).unwrap_or_default();
    match status {
        Some(s) if s.success() => std::fs::read_to_string(&out).unwrap(),
        Some(s) => panic!(
            "Chromium exited {s} rendering {}: {}",
            page.display(),
            log()
        ),
        None => panic!(
            "Chromium did not finish rendering {} in 60 s: {}",
            page.display(),
            log()
        ),
    }
}

/// Asserts that `html`, rendered in a [`WINDOW_PX`] window, neither scrolls sideways nor hides
/// columns in a scrolling box, that every table ends inside the window, and that in every
/// picture each text lies inside it and covers no other text. Returns the pictures' titles
/// (their first text), for the caller to check that they are all there.
pub(crate) fn assert_reads_at_window_width(html: &str) -> Vec<String> {
    let m = measure(html);
    let num = |v: &Value| v.as_f64().unwrap();
    assert_eq!(num(&m["window"]), f64::from(WINDOW_PX), "{m}");
    assert!(
        num(&m["scroll"]) <= num(&m["client"]),
        "the page scrolls sideways: {} px wide in {} px",
        m["scroll"],
        m["client"]
    );
    assert_eq!(
        m["scrollers"],
        Value::Array(vec![]),
        "boxes that scroll sideways"
    );
    for table in m["tables"].as_array().unwrap() {
        assert!(
            num(&table["right"]) <= num(&m["client"]),
            "a table runs past the window: {table}"
        );
    }
    let figures = m["figures"].as_array().unwrap();
    for figure in figures {
        assert_eq!(
            figure["outside"],
            Value::Array(vec![]),
            "text cut off: {figure}"
        );
        assert_eq!(
            figure["covered"],
            Value::Array(vec![]),
            "text over text: {figure}"
        );
    }
    figures
        .iter()
        .map(|f| f["title"].as_str().unwrap().trim().to_owned())
        .collect()
}
