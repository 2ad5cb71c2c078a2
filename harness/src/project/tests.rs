use super::*;

/// A folder tree in a temporary directory (outside failmode's checkout).
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.0.path().canonicalize().unwrap().join(relative)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn dir(&self, relative: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// A stand-in for failmode's checkout at `relative`.
    fn checkout(&self, relative: &str) -> PathBuf {
        let toml = "[workspace]\nmembers = [\"harness\", \"targets/reference\"]\n";
        self.write(&format!("{relative}/Cargo.toml"), toml);
        self.path(relative)
    }
}

fn manifest(variants: &[&str]) -> String {
    let mut text = "default_instances = 1\nstart = { command = [\"bin/mine\", \"{port}\"] }\n\
                    ready = { path = \"/healthz\", timeout = \"1s\" }\n\
                    request = { path = \"/\", caller_header = \"x-caller\" }\n"
        .to_owned();
    for v in variants {
        text += &format!("[[variants]]\nname = \"{v}\"\n");
    }
    text
}

/// A built-in scenario with its targets replaced by `targets` (TOML of `[[targets]]` tables).
fn scenario_with_targets(targets: &str) -> String {
    let text = builtin::scenario("slow-redis").unwrap();
    let head = text.split("[[targets]]").next().unwrap();
    let phases = &text[text.find("[[phases]]").unwrap()..];
    format!("{head}{targets}\n{phases}")
}

#[test]
fn a_project_is_the_nearest_folder_upward_holding_failmode() {
    let tree = Tree::new();
    tree.dir("repo/failmode/targets");
    let below = tree.dir("repo/src/deep");
    let project = Project::find_from(&below);
    assert_eq!(project.root(), tree.path("repo"));
    assert_eq!(project.folder(), Some(tree.path("repo/failmode")));
    assert_eq!(project.results_dir(), tree.path("repo/results"));
    assert_eq!(project.checkout(), None);
}

#[test]
fn without_a_project_or_a_checkout_results_go_to_the_current_directory() {
    let tree = Tree::new();
    let here = tree.dir("somewhere");
    let project = Project::find_from(&here);
    assert_eq!(project.root(), here);
    assert_eq!(project.folder(), None);
    assert_eq!(project.results_dir(), here.join("results"));
    // Only the built-ins, then.
    let sources: Vec<Source> = project.scenarios().iter().map(|e| e.source).collect();
    assert!(sources.iter().all(|s| *s == Source::BuiltIn), "{sources:?}");
    assert_eq!(sources.len(), builtin::SCENARIOS.len());
}

#[test]
fn a_clone_of_failmode_named_failmode_is_not_a_project() {
    let tree = Tree::new();
    tree.checkout("home/failmode");
    let home = tree.path("home");
    assert!(!is_project(&home));
    assert_eq!(Project::find_from(&home).root(), home);
}

#[test]
fn inside_failmode_s_checkout_without_a_project_the_checkout_is_the_project() {
    let tree = Tree::new();
    let checkout = tree.checkout("failmode-src");
    let below = tree.dir("failmode-src/harness/src");
    let project = Project::find_from(&below);
    assert_eq!(project.root(), checkout);
    assert_eq!(project.checkout(), Some(checkout.as_path()));
    assert_eq!(project.folder(), None);
    assert_eq!(project.results_dir(), checkout.join("results"));
}

#[test]
fn an_explicit_project_directory_must_exist() {
    let tree = Tree::new();
    let missing = tree.path("nope");
    let err = Project::resolve(Some(&missing)).unwrap_err().to_string();
    assert!(err.contains("--project") && err.contains("nope"), "{err}");
    let there = tree.dir("there");
    assert_eq!(Project::resolve(Some(&there)).unwrap().root(), there);
}

#[test]
fn scenarios_are_looked_up_in_the_project_then_the_checkout_then_the_built_ins() {
    let tree = Tree::new();
    let checkout = tree.checkout("failmode-src");
    let ours = scenario_with_targets("[[targets]]\nname = \"reference\"\n")
        .replace("name = \"slow-redis\"", "name = \"ours\"");
    tree.write("failmode-src/scenarios/slow-redis.toml", &ours);
    tree.write("failmode-src/scenarios/only-checkout.toml", &ours);
    tree.write(
        "failmode-src/examples/app/failmode/scenarios/slow-redis.toml",
        &ours,
    );
    let project = Project::find_from(&tree.path("failmode-src/examples/app"));
    assert_eq!(project.root(), tree.path("failmode-src/examples/app"));
    assert_eq!(project.checkout(), Some(checkout.as_path()));

    let found = |name: &str| project.scenario(name).map(|e| (e.source, e.path));
    assert_eq!(
        found("slow-redis"),
        Some((
            Source::Project,
            Some(tree.path("failmode-src/examples/app/failmode/scenarios/slow-redis.toml"))
        ))
    );
    assert_eq!(
        found("only-checkout"),
        Some((
            Source::Checkout,
            Some(tree.path("failmode-src/scenarios/only-checkout.toml"))
        ))
    );
    assert_eq!(found("redis-down"), Some((Source::BuiltIn, None)));
    assert_eq!(found("nope"), None);

    let listed = project.scenarios();
    let slow: Vec<&ScenarioEntry> = listed.iter().filter(|e| e.name == "slow-redis").collect();
    assert_eq!(slow.len(), 1, "a name is listed once: {listed:?}");
    assert_eq!(slow[0].source, Source::Project);
    assert!(listed.windows(2).all(|w| w[0].name < w[1].name));

    assert_eq!(project.find_scenario("slow-redis").unwrap().name, "ours");
    let built_in = project.find_scenario("redis-down").unwrap();
    assert_eq!(built_in.name, "redis-down");
    assert_eq!(
        project.scenario_text("redis-down").unwrap(),
        builtin::scenario("redis-down").unwrap()
    );
    let err = project.find_scenario("nope").unwrap_err().to_string();
    assert!(
        err.contains("\"nope\"") && err.contains("only-checkout") && err.contains("baseline"),
        "{err}"
    );
}

#[test]
fn a_scenario_given_as_a_path_is_read_from_it() {
    let tree = Tree::new();
    let text = scenario_with_targets("[[targets]]\nname = \"reference\"\n")
        .replace("name = \"slow-redis\"\n", "");
    let path = tree.write("elsewhere/my-run.toml", &text);
    let project = Project::find_from(&tree.dir("cwd"));
    let s = project.find_scenario(&path.display().to_string()).unwrap();
    assert_eq!(s.name, "my-run");
    assert_eq!(
        project.scenario_text(&path.display().to_string()).unwrap(),
        text
    );
}

#[test]
fn targets_are_the_project_s_then_the_checkout_s_then_the_built_in_reference() {
    let tree = Tree::new();
    tree.checkout("failmode-src");
    tree.write(
        "failmode-src/targets/node/peer/target.toml",
        &manifest(&["peer", "fail-closed"]),
    );
    tree.write(
        "failmode-src/app/failmode/targets/mine/target.toml",
        &manifest(&["mine", "fail-open"]),
    );
    let project = Project::find_from(&tree.path("failmode-src/app"));
    let all = project.targets().unwrap();
    let find = |name: &str| {
        all.iter()
            .find(|e| e.def.name == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    assert_eq!(find("mine").source, Source::Project);
    assert_eq!(find("mine").def.dir, Some(tree.path("failmode-src/app")));
    // The project's fail-open hides the built-in one, the checkout's fail-closed too.
    assert_eq!(find("fail-open").source, Source::Project);
    assert_eq!(find("fail-closed").source, Source::Checkout);
    assert_eq!(find("peer").def.dir, Some(tree.path("failmode-src")));
    let reference = find("reference");
    assert_eq!(reference.source, Source::BuiltIn);
    assert_eq!(reference.def.build, None);
    assert!(
        reference.def.command[0].ends_with(REFERENCE_PROGRAM),
        "{:?}",
        reference.def.command
    );
    assert_eq!(reference.def.env["FAILMODE_POLICY"], "local-share");
    assert_eq!(all.iter().filter(|e| e.def.name == "fail-open").count(), 1);
}

#[test]
fn outside_a_checkout_the_reference_s_policies_are_built_in_and_peers_are_not_found() {
    let tree = Tree::new();
    let project = Project::find_from(&tree.dir("anywhere"));
    let names: Vec<String> = project
        .targets()
        .unwrap()
        .into_iter()
        .map(|e| e.def.name)
        .collect();
    for n in ["reference", "fail-open", "fail-closed", "local-only"] {
        assert!(names.iter().any(|x| x == n), "{n} missing: {names:?}");
    }
    assert!(
        !names.iter().any(|x| x == "express-rate-limit"),
        "{names:?}"
    );
    // …but the peers built in are templates for `init`.
    let templates: Vec<String> = project
        .templates()
        .unwrap()
        .into_iter()
        .map(|e| e.def.name)
        .collect();
    for n in ["express-rate-limit", "flask-limiter", "go-redis-rate"] {
        assert!(templates.iter().any(|x| x == n), "{n}: {templates:?}");
    }
}

#[test]
fn a_scenario_names_a_manifest_by_path_relative_to_its_file() {
    let tree = Tree::new();
    tree.write(
        "app/failmode/targets/mine/target.toml",
        &manifest(&["mine", "mine-v2"]),
    );
    tree.write("elsewhere/target.toml", &manifest(&["solo"]));
    let targets = "[[targets]]\nmanifest = \"../targets/mine/target.toml\"\nvariant = \"mine-v2\"\n\
                   instances = 2\n\
                   [[targets]]\nmanifest = \"../../../elsewhere/target.toml\"\n\
                   [[targets]]\nname = \"reference\"\n";
    let path = tree.write(
        "app/failmode/scenarios/by-path.toml",
        &scenario_with_targets(targets),
    );
    let s = Scenario::load(&path).unwrap();
    let names: Vec<&str> = s.targets.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["mine-v2", "solo", "reference"]);
    assert_eq!(
        s.targets[0].manifest.as_ref().unwrap().path,
        tree.path("app/failmode/scenarios/../targets/mine/target.toml")
    );
    assert_eq!(s.targets[0].instances, Some(2));

    let project = Project::find_from(&tree.path("app"));
    let defs = project.targets_for(&s).unwrap();
    let def = |name: &str| defs.iter().find(|d| d.name == name).unwrap();
    assert_eq!(def("mine-v2").dir, Some(tree.path("app")));
    // A manifest outside the project runs from its own folder.
    assert_eq!(def("solo").dir, Some(tree.path("elsewhere")));
    assert!(defs.iter().any(|d| d.name == "reference"));
    let picked = manifest::select(&defs, &["mine-v2".to_owned(), "reference".to_owned()]);
    assert_eq!(picked.unwrap().len(), 2);
}

#[test]
fn a_manifest_named_by_path_is_checked_naming_the_key_and_line() {
    let tree = Tree::new();
    tree.write("p/targets/two/target.toml", &manifest(&["a", "b"]));
    let load = |targets: &str| {
        let path = tree.write("p/s.toml", &scenario_with_targets(targets));
        Scenario::load(&path).unwrap_err().to_string()
    };
    // The line of the first [[targets]] entry.
    let line = |e: &str| {
        let head = builtin::scenario("slow-redis").unwrap();
        let n = head
            .split("[[targets]]")
            .next()
            .unwrap()
            .matches('\n')
            .count()
            + 1;
        assert!(e.contains(&format!("line {n}")), "{e}");
    };

    let e = load("[[targets]]\nmanifest = \"targets/none/target.toml\"\n");
    assert!(
        e.contains("`targets.manifest`") && e.contains("targets/none/target.toml"),
        "{e}"
    );
    line(&e);
    let e = load("[[targets]]\nmanifest = \"targets/two/target.toml\"\n");
    assert!(
        e.contains("`targets.manifest`")
            && e.contains("2 variants (a, b)")
            && e.contains("variant"),
        "{e}"
    );
    let e = load("[[targets]]\nmanifest = \"targets/two/target.toml\"\nvariant = \"c\"\n");
    assert!(
        e.contains("`targets.variant`") && e.contains("\"c\""),
        "{e}"
    );
    let e = load(
        "[[targets]]\nmanifest = \"targets/two/target.toml\"\nvariant = \"a\"\n\
         [[targets]]\nname = \"a\"\n",
    );
    assert!(e.contains("\"a\" is listed twice"), "{e}");
}

#[test]
fn a_command_naming_no_scenario_gets_the_projects_only_scenario_and_is_told_to_name_one_otherwise()
{
    let tree = Tree::new();
    tree.dir("repo/failmode/scenarios");
    let project = Project::find_from(&tree.path("repo"));
    let none = project.only_scenario().unwrap_err().to_string();
    assert!(none.contains("no scenario of its own"), "{none}");

    let text = builtin::scenario("slow-redis").unwrap();
    tree.write("repo/failmode/scenarios/mine.toml", text);
    assert_eq!(project.only_scenario().unwrap(), "mine");

    tree.write("repo/failmode/scenarios/other.toml", text);
    let two = project.only_scenario().unwrap_err().to_string();
    assert!(two.contains("2: mine, other"), "{two}");
}

#[test]
fn check_finds_a_target_by_name_or_by_a_manifest_of_one_variant() {
    let tree = Tree::new();
    tree.write(
        "app/failmode/targets/mine/target.toml",
        &manifest(&["mine"]),
    );
    let two = tree.write("elsewhere/two.toml", &manifest(&["a", "b"]));
    let one = tree.write("app/extra/one.toml", &manifest(&["solo"]));
    let project = Project::find_from(&tree.path("app"));
    assert_eq!(project.find_target("mine").unwrap().name, "mine");
    assert_eq!(project.find_target("reference").unwrap().name, "reference");
    let err = project.find_target("nope").unwrap_err().to_string();
    assert!(err.contains("\"nope\"") && err.contains("mine"), "{err}");
    let solo = project.find_target(one.to_str().unwrap()).unwrap();
    assert_eq!(solo.name, "solo");
    // A manifest inside the project runs from the project's root, as its named targets do.
    assert_eq!(solo.dir, Some(tree.path("app")));
    let err = project
        .find_target(two.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("2 variants (a, b)"), "{err}");
}
