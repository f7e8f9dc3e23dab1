//! What a plugin file must pass before it is opened: trusted ownership and
//! mode (like sshd's StrictModes), a size stable across two checks, the ELF
//! magic number, and its `plugins.pin` digest; and where it is copied to.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::PluginError;

/// The first four bytes of every ELF file.
pub const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];

/// Whether `path` names a plugin: `*.so`, not a dotfile, not `*.tmp`.
pub fn is_plugin_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    !name.starts_with('.') && !name.ends_with(".tmp") && name.ends_with(".so") && name.len() > 3
}

/// The pin key of a plugin file: its file name without `.so`.
pub fn pin_key(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub use quiver_config::paths::current_uid;

/// Refuses `path` (a file or directory) when it is owned by someone other
/// than this process's user or root, or is writable by group or others.
pub fn check_trusted(path: &Path) -> Result<(), PluginError> {
    let metadata = std::fs::metadata(path).map_err(|e| PluginError::io(path, e))?;
    check_trusted_metadata(path, &metadata)
}

/// A plugin file read in full and checked; what gets copied and loaded is
/// exactly these bytes.
#[derive(Debug)]
pub struct Candidate {
    /// The file in the plugin directory.
    pub path: PathBuf,
    /// Its content.
    pub bytes: Vec<u8>,
    /// Lowercase hex sha256 of `bytes`.
    pub sha256: String,
    /// The file's metadata when it was read.
    pub fingerprint: Fingerprint,
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Default for `plugins.max_file_bytes`: larger files are refused before
/// anything of them is read.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// What identifies one version of a file without reading it: a change of
/// content, mode or owner changes one of these (ctime moves on chmod and
/// chown). Compared before a file is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Fingerprint {
    fn of(metadata: &std::fs::Metadata) -> Fingerprint {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Fingerprint {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.len(),
            mtime_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
            ctime_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// The fingerprint of what `path` names now (a symlink is followed),
    /// from metadata only: nothing is opened or read.
    pub fn of_path(path: &Path) -> Option<Fingerprint> {
        std::fs::metadata(path).ok().map(|m| Fingerprint::of(&m))
    }
}

/// The limits a candidate is read under.
#[derive(Debug, Clone, Copy)]
pub struct ReadLimits {
    /// Skip the ownership and permission checks.
    pub dev: bool,
    /// Pause between the two size checks.
    pub stable_wait: Duration,
    /// Larger files are refused unread.
    pub max_bytes: u64,
}

/// Refuses `metadata` (of `path`) unless it is a regular file.
fn check_regular(path: &Path, metadata: &std::fs::Metadata) -> Result<(), PluginError> {
    let kind = metadata.file_type();
    if kind.is_file() {
        return Ok(());
    }
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(PluginError::NotRegular {
        path: path.to_owned(),
        what,
    })
}

/// Trust checks of `metadata` (of `path`), as [`check_trusted`] does.
fn check_trusted_metadata(path: &Path, metadata: &std::fs::Metadata) -> Result<(), PluginError> {
    let uid = current_uid().unwrap_or(0);
    if metadata.uid() != uid && metadata.uid() != 0 {
        return Err(PluginError::Untrusted {
            path: path.to_owned(),
            reason: format!(
                "owned by uid {}, not by this daemon's user (uid {uid}) or root",
                metadata.uid()
            ),
        });
    }
    let mode = metadata.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(PluginError::Untrusted {
            path: path.to_owned(),
            reason: format!(
                "writable by {} (mode {:o})",
                if mode & 0o002 != 0 {
                    "anyone"
                } else {
                    "its group"
                },
                mode & 0o7777
            ),
        });
    }
    Ok(())
}

/// Reads `path` after the type, trust (unless `dev`), size, ELF-magic and
/// stability checks, all on one open file descriptor: what is checked,
/// hashed and later copied are the same bytes, whatever is renamed over
/// the path meanwhile.
///
/// Only a regular file is opened (a FIFO, device, socket or directory is
/// refused from its `lstat`, and again from the open descriptor, opened
/// non-blocking so a FIFO swapped in cannot hang the loader). A symlink is
/// followed only when its own directory, its target and the target's
/// directory all pass the trust checks. A file over `max_bytes` is refused
/// before any of it is read, and a file without the ELF magic after only
/// its first bytes are.
pub fn read_candidate(path: &Path, limits: ReadLimits) -> Result<Candidate, PluginError> {
    use std::os::unix::fs::OpenOptionsExt;
    let link = std::fs::symlink_metadata(path).map_err(|e| PluginError::io(path, e))?;
    let target = if link.file_type().is_symlink() {
        Some(std::fs::canonicalize(path).map_err(|e| PluginError::io(path, e))?)
    } else {
        check_regular(path, &link)?;
        None
    };
    if !limits.dev {
        if let Some(dir) = path.parent() {
            check_trusted(dir)?;
        }
        if let Some(target) = &target
            && let Some(dir) = target.parent()
        {
            check_trusted(dir)?;
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| PluginError::io(path, e))?;
    let first = file.metadata().map_err(|e| PluginError::io(path, e))?;
    check_regular(path, &first)?;
    if let Some(target) = &target {
        // The descriptor must be the target that was checked, not a file
        // the link was pointed at since.
        let checked = std::fs::metadata(target).map_err(|e| PluginError::io(target, e))?;
        if (checked.dev(), checked.ino()) != (first.dev(), first.ino()) {
            return Err(PluginError::NotStable {
                path: path.to_owned(),
                first: checked.len(),
                second: first.len(),
            });
        }
    }
    if !limits.dev {
        check_trusted_metadata(target.as_deref().unwrap_or(path), &first)?;
    }
    if first.len() > limits.max_bytes {
        return Err(PluginError::TooLarge {
            path: path.to_owned(),
            size: first.len(),
            limit: limits.max_bytes,
        });
    }
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(PluginError::io(path, e)),
        }
    }
    if got < magic.len() || magic != ELF_MAGIC {
        return Err(PluginError::NotElf {
            path: path.to_owned(),
        });
    }
    std::thread::sleep(limits.stable_wait);
    let second = file.metadata().map_err(|e| PluginError::io(path, e))?;
    if first.len() != second.len() || first.modified().ok() != second.modified().ok() {
        return Err(PluginError::NotStable {
            path: path.to_owned(),
            first: first.len(),
            second: second.len(),
        });
    }
    let mut bytes = Vec::with_capacity(second.len() as usize);
    bytes.extend_from_slice(&magic);
    (&mut file)
        .take(limits.max_bytes.saturating_sub(magic.len() as u64) + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| PluginError::io(path, e))?;
    if bytes.len() as u64 != second.len() {
        return Err(PluginError::NotStable {
            path: path.to_owned(),
            first: second.len(),
            second: bytes.len() as u64,
        });
    }
    check_elf(&bytes).map_err(|detail| PluginError::BadElf {
        path: path.to_owned(),
        detail,
    })?;
    let sha256 = sha256_hex(&bytes);
    Ok(Candidate {
        path: path.to_owned(),
        bytes,
        sha256,
        fingerprint: Fingerprint::of(&second),
    })
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at + 2)?;
    Some(u64::from(u16::from_le_bytes([b[0], b[1]])))
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Checks that a 64-bit little-endian ELF shared object is whole: its
/// program headers, their segments and its section header table all lie
/// inside the file. The dynamic loader maps segments past the end of a
/// truncated file without complaint, and the first touch of such a page
/// kills the process with SIGBUS, so this must be checked before opening.
pub fn check_elf(bytes: &[u8]) -> Result<(), String> {
    let len = bytes.len() as u64;
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let short = || format!("truncated: the ELF header needs 64 bytes, the file has {len}");
    let e_type = read_u16(bytes, 16).ok_or_else(short)?;
    if e_type != 3 {
        return Err(format!("ELF type {e_type} is not a shared object (3)"));
    }
    let phoff = read_u64(bytes, 32).ok_or_else(short)?;
    let shoff = read_u64(bytes, 40).ok_or_else(short)?;
    let phentsize = read_u16(bytes, 54).ok_or_else(short)?;
    let phnum = read_u16(bytes, 56).ok_or_else(short)?;
    let shentsize = read_u16(bytes, 58).ok_or_else(short)?;
    let shnum = read_u16(bytes, 60).ok_or_else(short)?;
    let truncated = |what: &str, end: u64| {
        format!("truncated: {what} ends at byte {end} but the file has {len} bytes")
    };
    let ph_end = phoff.saturating_add(phentsize.saturating_mul(phnum));
    if ph_end > len || phentsize < 56 {
        return Err(truncated("the program header table", ph_end));
    }
    for index in 0..phnum {
        let at = (phoff + index * phentsize) as usize;
        let offset = read_u64(bytes, at + 8).ok_or_else(short)?;
        let filesz = read_u64(bytes, at + 32).ok_or_else(short)?;
        let end = offset.saturating_add(filesz);
        if end > len {
            return Err(truncated(&format!("segment {index}"), end));
        }
    }
    if shoff != 0 {
        let sh_end = shoff.saturating_add(shentsize.saturating_mul(shnum));
        if sh_end > len {
            return Err(truncated("the section header table", sh_end));
        }
    }
    Ok(())
}

/// Writes `candidate` to a fresh private path in `state_dir` (through a
/// temporary file and a rename) and returns that path. Each load gets its
/// own path: the dynamic loader returns the already-loaded code for a path
/// it has seen, and overwriting a loaded file would crash the host.
pub fn private_copy(
    candidate: &Candidate,
    state_dir: &Path,
    sequence: u64,
) -> Result<PathBuf, PluginError> {
    let stem = pin_key(&candidate.path);
    let name = format!(
        "{stem}.{}.{sequence}.{}.so",
        std::process::id(),
        &candidate.sha256[..12]
    );
    let target = state_dir.join(&name);
    let temporary = state_dir.join(format!(".{name}.tmp"));
    std::fs::write(&temporary, &candidate.bytes).map_err(|e| PluginError::io(&temporary, e))?;
    std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o500))
        .map_err(|e| PluginError::io(&temporary, e))?;
    std::fs::rename(&temporary, &target).map_err(|e| PluginError::io(&target, e))?;
    Ok(target)
}

/// Creates `state_dir` private to this user (mode 0700, parents too) and
/// removes copies left by earlier processes (they are loaded by no one
/// now). An existing directory others can read or write is refused: the
/// copies in it are what the daemon loads.
pub fn prepare_state_dir(state_dir: &Path) -> Result<(), PluginError> {
    quiver_config::paths::make_private_dir(state_dir).map_err(|e| PluginError::Untrusted {
        path: e.path,
        reason: e.detail,
    })?;
    let pid = format!(".{}.", std::process::id());
    let entries = std::fs::read_dir(state_dir).map_err(|e| PluginError::io(state_dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".so") && !name.contains(&pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn plugin_file_names() {
        assert!(is_plugin_file(Path::new("/p/text.so")));
        assert!(!is_plugin_file(Path::new("/p/.text.so")));
        assert!(!is_plugin_file(Path::new("/p/text.so.tmp")));
        assert!(!is_plugin_file(Path::new("/p/text.tmp")));
        assert!(!is_plugin_file(Path::new("/p/text.txt")));
        assert!(!is_plugin_file(Path::new("/p/.so")));
        assert_eq!(pin_key(Path::new("/p/text.so")), "text");
    }

    fn limits(dev: bool) -> ReadLimits {
        ReadLimits {
            dev,
            stable_wait: Duration::ZERO,
            max_bytes: 1 << 20,
        }
    }

    fn private_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn fifos_directories_and_huge_files_are_refused_unread() {
        let dir = private_dir();
        let fifo = dir.path().join("fifo.so");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let error = read_candidate(&fifo, limits(false)).unwrap_err();
        assert!(error.to_string().contains("a FIFO"), "{error}");
        std::fs::create_dir(dir.path().join("d.so")).unwrap();
        let error = read_candidate(&dir.path().join("d.so"), limits(false)).unwrap_err();
        assert!(error.to_string().contains("a directory"), "{error}");
        // Sparse: nothing is allocated, and nothing must be read.
        let huge = dir.path().join("huge.so");
        let file = std::fs::File::create(&huge).unwrap();
        file.set_len(100 << 30).unwrap();
        std::fs::set_permissions(&huge, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = read_candidate(&huge, limits(false)).unwrap_err();
        assert!(matches!(error, PluginError::TooLarge { .. }), "{error}");
        file.set_len(1000).unwrap();
        let error = read_candidate(&huge, limits(false)).unwrap_err();
        assert!(matches!(error, PluginError::NotElf { .. }), "{error}");
    }

    #[test]
    fn a_symlink_into_a_world_writable_dir_is_refused() {
        let dir = private_dir();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let target = open.join("real.so");
        std::fs::write(&target, &exe[..64]).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        std::fs::set_permissions(&plugins, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = plugins.join("link.so");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = read_candidate(&link, limits(false)).unwrap_err();
        assert!(matches!(error, PluginError::Untrusted { .. }), "{error}");
        assert!(error.to_string().contains("open"), "{error}");
    }

    #[test]
    fn non_elf_and_untrusted_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.so");
        std::fs::write(&path, b"#!/bin/sh\n").unwrap();
        assert!(matches!(
            read_candidate(&path, limits(true)),
            Err(PluginError::NotElf { .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let error = read_candidate(&path, limits(false)).unwrap_err();
        assert!(matches!(error, PluginError::Untrusted { .. }), "{error}");
        assert!(error.to_string().contains("writable by anyone"), "{error}");
    }

    #[test]
    fn truncated_elf_is_refused() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // The test binary is a PIE executable (type 3 too) and whole.
        assert_eq!(check_elf(&exe), Ok(()));
        let half = &exe[..exe.len() / 2];
        assert!(check_elf(half).unwrap_err().contains("truncated"));
        assert!(check_elf(&exe[..40]).unwrap_err().contains("truncated"));
    }

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
