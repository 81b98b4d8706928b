//! Where a language model named over the API may be read from: the models directory and the directories
//! the operator allows at start (`--allow-model-dir`). A name is looked up only there, and a file that
//! lies elsewhere (an absolute path outside them, a `..` that climbs out, a symlink whose target leaves
//! them) is not found, exactly as a file that does not exist: whoever names a model learns nothing of the
//! rest of the server's files.

use std::path::{Component, Path, PathBuf};

/// The models directory and the directories the operator allows, each as its canonical path (a
/// directory that does not exist holds nothing and is left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelPlaces {
    roots: Vec<PathBuf>,
}

impl ModelPlaces {
    /// `models_dir` first, then `allowed` in the order given.
    pub fn new(models_dir: &Path, allowed: &[PathBuf]) -> ModelPlaces {
        let roots = std::iter::once(models_dir)
            .chain(allowed.iter().map(PathBuf::as_path))
            .filter_map(|dir| dir.canonicalize().ok())
            .filter(|dir| dir.is_dir())
            .collect();
        ModelPlaces { roots }
    }

    /// The file `name` names, by its canonical path, when it lies inside one of the places: an absolute
    /// path inside one, or a path relative to one (tried in order, as given and then with `.gguf`). None
    /// for a name with a `..` component, and for any file outside the places, whether it exists or not.
    pub fn find(&self, name: &str) -> Option<PathBuf> {
        let named = Path::new(name);
        if name.is_empty() || named.components().any(|part| part == Component::ParentDir) {
            return None;
        }
        let candidates: Vec<PathBuf> = if named.is_absolute() {
            vec![named.to_path_buf()]
        } else {
            self.roots.iter().flat_map(|root| [root.join(name), root.join(format!("{name}.gguf"))]).collect()
        };
        candidates.into_iter().find_map(|candidate| self.inside(&candidate))
    }

    /// `path`'s canonical form (symlinks followed), when it is a file inside one of the places.
    fn inside(&self, path: &Path) -> Option<PathBuf> {
        let real = path.canonicalize().ok()?;
        (real.is_file() && self.roots.iter().any(|root| real.starts_with(root))).then_some(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A models directory and an allowed one, each holding a file, and a file outside both.
    struct Layout {
        _top: tempfile::TempDir,
        models: PathBuf,
        allowed: PathBuf,
        outside: PathBuf,
    }

    fn layout() -> Layout {
        let top = tempfile::tempdir().unwrap();
        let root = top.path().canonicalize().unwrap();
        let (models, allowed, elsewhere) = (root.join("models"), root.join("allowed"), root.join("elsewhere"));
        for dir in [&models, &allowed, &elsewhere, &models.join("sub")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(models.join("mine.gguf"), b"GGUF").unwrap();
        std::fs::write(models.join("sub/deep.gguf"), b"GGUF").unwrap();
        std::fs::write(allowed.join("theirs.gguf"), b"GGUF").unwrap();
        let outside = elsewhere.join("secret.gguf");
        std::fs::write(&outside, b"GGUF").unwrap();
        Layout { _top: top, models, allowed, outside }
    }

    #[test]
    fn names_and_paths_inside_the_places_are_found() {
        let at = layout();
        let places = ModelPlaces::new(&at.models, std::slice::from_ref(&at.allowed));
        assert_eq!(places.find("mine"), Some(at.models.join("mine.gguf")));
        assert_eq!(places.find("mine.gguf"), Some(at.models.join("mine.gguf")));
        assert_eq!(places.find("sub/deep.gguf"), Some(at.models.join("sub/deep.gguf")));
        assert_eq!(places.find("./sub/deep"), Some(at.models.join("sub/deep.gguf")));
        assert_eq!(places.find(&at.models.join("mine.gguf").display().to_string()), Some(at.models.join("mine.gguf")));
        let theirs = at.allowed.join("theirs.gguf");
        assert_eq!(places.find(&theirs.display().to_string()), Some(theirs.clone()));
        assert_eq!(places.find("theirs"), Some(theirs), "a name is looked up in the allowed directories too");
    }

    #[test]
    fn files_outside_the_places_are_not_found_whether_they_exist_or_not() {
        let at = layout();
        let places = ModelPlaces::new(&at.models, std::slice::from_ref(&at.allowed));
        assert_eq!(places.find(&at.outside.display().to_string()), None, "exists, outside");
        assert_eq!(places.find("/nonexistent/model.gguf"), None);
        assert_eq!(places.find("/etc/passwd"), None);
        assert_eq!(places.find("../elsewhere/secret.gguf"), None, "climbs out");
        assert_eq!(places.find("sub/../mine.gguf"), None, "a `..` is refused even when it stays inside");
        let climbing = format!("{}/../elsewhere/secret.gguf", at.models.display());
        assert_eq!(places.find(&climbing), None);
        assert_eq!(places.find("sub"), None, "a directory is not a model");
        assert_eq!(places.find(""), None);
        assert_eq!(ModelPlaces::new(&at.models, &[]).find(&at.allowed.join("theirs.gguf").display().to_string()), None);
    }

    #[test]
    fn a_symlink_that_leaves_the_places_is_not_followed_out() {
        let at = layout();
        std::os::unix::fs::symlink(&at.outside, at.models.join("link.gguf")).unwrap();
        std::os::unix::fs::symlink(at.outside.parent().unwrap(), at.models.join("linked-dir")).unwrap();
        std::os::unix::fs::symlink(at.models.join("mine.gguf"), at.models.join("alias.gguf")).unwrap();
        let places = ModelPlaces::new(&at.models, &[]);
        assert_eq!(places.find("link"), None);
        assert_eq!(places.find("linked-dir/secret.gguf"), None);
        assert_eq!(places.find("alias"), Some(at.models.join("mine.gguf")), "a link that stays inside is fine");
    }

    #[test]
    fn a_models_directory_reached_through_a_symlink_still_holds_its_files() {
        let at = layout();
        let link = at.allowed.join("models-link");
        std::os::unix::fs::symlink(&at.models, &link).unwrap();
        let places = ModelPlaces::new(&link, &[]);
        assert_eq!(places.find(&link.join("mine.gguf").display().to_string()), Some(at.models.join("mine.gguf")));
        assert_eq!(places.find("mine"), Some(at.models.join("mine.gguf")));
    }
}
