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
}

/// Lowercase hex sha256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads `path` after the trust (unless `dev`), stability and ELF checks.
pub fn read_candidate(
    path: &Path,
    dev: bool,
    stable_wait: Duration,
) -> Result<Candidate, PluginError> {
    if !dev {
        check_trusted(path)?;
        if let Some(dir) = path.parent() {
            check_trusted(dir)?;
        }
    }
    let first = std::fs::metadata(path).map_err(|e| PluginError::io(path, e))?;
    std::thread::sleep(stable_wait);
    let second = std::fs::metadata(path).map_err(|e| PluginError::io(path, e))?;
    if first.len() != second.len() || first.modified().ok() != second.modified().ok() {
        return Err(PluginError::NotStable {
            path: path.to_owned(),
            first: first.len(),
            second: second.len(),
        });
    }
    let mut bytes = Vec::with_capacity(second.len() as usize);
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| PluginError::io(path, e))?;
    if bytes.len() as u64 != second.len() {
        return Err(PluginError::NotStable {
            path: path.to_owned(),
            first: second.len(),
            second: bytes.len() as u64,
        });
    }
    if bytes.get(..4) != Some(&ELF_MAGIC[..]) {
        return Err(PluginError::NotElf {
            path: path.to_owned(),
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

    #[test]
    fn non_elf_and_untrusted_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.so");
        std::fs::write(&path, b"#!/bin/sh\n").unwrap();
        assert!(matches!(
            read_candidate(&path, true, Duration::ZERO),
            Err(PluginError::NotElf { .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let error = read_candidate(&path, false, Duration::ZERO).unwrap_err();
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
