//! Results files are written whole or not at all: each goes to a temporary name in its own
//! folder and is renamed over the final name once complete, so a crash or a failed write
//! leaves the old file (or none), never a truncated one that `gate` or `merge` would read.

use std::fs::Permissions;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `contents` to `path`, replacing what was there only once all of it is written.
pub fn write(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    write_with(path, |out| out.write_all(contents.as_ref()))
}

/// What a written file must survive once the write returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lasting {
    /// A power cut: on disk before it is renamed into place. Results.
    PowerCuts,
    /// The writer being killed: in the kernel's cache is enough, and rewriting it every second
    /// costs no disk flush. A run's journal.
    Kills,
}

/// Writes to `path` what `fill` writes (buffered), replacing what was there only once `fill`
/// succeeds; when it fails, the old file stays and nothing else is left behind.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_lasting(path, Lasting::PowerCuts, fill)
}

/// [`write_with`], as lasting as `lasting` says.
pub fn write_lasting(
    path: &Path,
    lasting: Lasting,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    // The same folder: a rename across file systems is a copy, which a crash can cut short.
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "results".into(), |n| n.to_string_lossy().into_owned());
    let temp = tempfile::Builder::new()
        // Hidden, and named after its file: a leftover from a killed process says what it was.
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        // As `fs::write` would create it (the umask applies), not tempfile's private 0600:
        // results are read by other users and by CI's artifact uploads.
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    let mut out = BufWriter::new(temp);
    fill(&mut out)?;
    let temp = out.into_inner().map_err(|e| e.into_error())?;
    if lasting == Lasting::PowerCuts {
        // On disk before the rename: otherwise a power cut could keep the new name with no
        // data.
        temp.as_file().sync_all()?;
    }
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_replaces_the_old_content_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        std::fs::write(&path, "old\n").unwrap();
        write(&path, "new and longer\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new and longer\n");
        assert_eq!(entries(dir.path()), ["run.json"]);
    }

    #[test]
    fn a_writer_that_fails_midway_leaves_the_old_file_intact_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("series.csv");
        std::fs::write(&path, "old\n").unwrap();
        let failed = write_with(&path, |out| {
            // More than the buffer holds: part of it reaches the temporary file first.
            out.write_all(&vec![b'x'; 64 * 1024])?;
            Err(std::io::Error::other("disk full"))
        });
        assert_eq!(failed.unwrap_err().to_string(), "disk full");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(entries(dir.path()), ["series.csv"]);
    }

    #[test]
    fn a_failed_first_write_leaves_no_file_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        let failed = write_with(&path, |out| {
            out.write_all(b"half")?;
            Err(std::io::Error::other("cut short"))
        });
        assert!(failed.is_err());
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn a_written_file_is_as_readable_as_one_fs_write_makes() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, plain) = (dir.path().join("a"), dir.path().join("b"));
        write(&ours, "x").unwrap();
        std::fs::write(&plain, "x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode();
        assert_eq!(mode(&ours), mode(&plain));
    }
}
