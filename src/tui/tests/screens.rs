//! Screens drawn on a `TestBackend` and compared with `snapshots/`: the panel
//! in each tab, at 80×24, empty, with a wrapped notice; details; diagnostic.

use crossterm::event::KeyCode;
use pretty_assertions::assert_eq;

use super::*;

#[test]
fn panel_running_tab() {
    let app = mixed();
    insta::assert_snapshot!(draw(&app, 100, 10).backend());
}

#[test]
fn panel_completed_and_failed_tabs() {
    let mut app = mixed();
    press(&mut app, KeyCode::Right);
    insta::assert_snapshot!("completed", draw(&app, 100, 8).backend());
    press(&mut app, KeyCode::Tab);
    insta::assert_snapshot!("failed", draw(&app, 100, 8).backend());
}

#[test]
fn panel_at_80x24_highlights_the_selection() {
    let mut app = mixed();
    press(&mut app, KeyCode::Down);
    let t = draw(&app, 80, 24);
    insta::assert_snapshot!(t.backend());
    let buf = t.backend().buffer();
    // Row 0 is the tab bar, row 1 the header: job-2 is the second job row.
    assert_eq!(buf[(0, 3)].symbol(), ">");
    for x in 0..80 {
        assert!(
            buf[(x, 3)].modifier.contains(Modifier::REVERSED),
            "column {x} of the selected row"
        );
        assert!(
            !buf[(x, 2)].modifier.contains(Modifier::REVERSED),
            "column {x} of another row"
        );
    }
}

#[test]
fn empty_state() {
    let app = App::new("default", now());
    insta::assert_snapshot!(draw(&app, 80, 24).backend());
}

#[test]
fn details_view() {
    let mut app = mixed();
    press(&mut app, KeyCode::End); // job-4, the foreground one
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        Action::Open(JobId::from("job-4"), PaneKind::Details)
    );
    let mut info = app.job(&JobId::from("job-4")).unwrap().clone();
    info.usage = Some(Usage {
        cpu_percent: 12.5,
        memory_bytes: 48 << 20,
    });
    info.limits.memory = Some(512 << 20);
    info.limits.not_enforced = vec!["cpus (no cgroup)".into()];
    let snippet = "step 39 ok\nstep 40 ok\n".to_string();
    app.apply(Msg::Job(Box::new(JobView { info, snippet })));
    app.apply(Msg::LogPage(JobId::from("job-4"), log_page(1..=40)));
    insta::assert_snapshot!(draw(&app, 80, 24).backend());
    // Scrolled up, the view holds still while lines keep coming.
    press(&mut app, KeyCode::PageUp);
    app.apply(Msg::LogLine(
        JobId::from("job-4"),
        log_page(41..=41).lines.remove(0),
    ));
    insta::assert_snapshot!("details_scrolled", draw(&app, 80, 24).backend());
}

#[test]
fn diagnostic_view() {
    let mut app = mixed();
    press(&mut app, KeyCode::BackTab); // FAILED: job-5 (killed by user), job-6, job-7
    press(&mut app, KeyCode::Down);
    assert_eq!(
        press(&mut app, KeyCode::Char('d')),
        Action::Open(JobId::from("job-6"), PaneKind::Diagnostic)
    );
    app.apply(Msg::LogPage(JobId::from("job-6"), log_page(381..=500)));
    app.apply(Msg::LogEnd(JobId::from("job-6")));
    insta::assert_snapshot!(draw(&app, 80, 24).backend());
}

#[test]
fn layer_view_shows_the_jobs_layer_as_a_diff() {
    let mut app = mixed();
    press(&mut app, KeyCode::BackTab);
    press(&mut app, KeyCode::Down);
    assert_eq!(
        press(&mut app, KeyCode::Char('l')),
        Action::Open(JobId::from("job-6"), PaneKind::Layer)
    );
    let diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-print('a')\n+print('b')\n1 path changed in layer job-6 (0 added, 1 changed, 0 deleted; 4 KiB in the layer)\n";
    app.apply(Msg::Text(JobId::from("job-6"), diff.into()));
    let screen = format!("{:?}", draw(&app, 80, 24).backend());
    assert!(
        screen.contains("Layer diff · job-6") && screen.contains("+print('b')"),
        "{screen}"
    );
    // Another job's text does not land in this pane.
    app.apply(Msg::Text(JobId::from("job-5"), "other".into()));
    assert!(!format!("{:?}", draw(&app, 80, 24).backend()).contains("other"));
}

#[test]
fn long_lists_scroll_around_the_selection() {
    let mut app = App::new("default", now());
    let jobs = (1..=40)
        .map(|n| {
            job(
                n,
                &format!("sleep {n}"),
                JobStatus::Running,
                StartMode::Background,
                60,
            )
        })
        .collect();
    app.apply(Msg::Jobs(jobs));
    for _ in 0..30 {
        press(&mut app, KeyCode::Down);
    }
    let t = draw(&app, 80, 24);
    let text = t.backend().to_string();
    assert!(text.contains("> job-31 "), "{text}");
    assert!(!text.contains("job-1 "), "the top scrolled away: {text}");
    assert!(text.contains("job-40 "), "{text}");
}

#[test]
fn long_notices_wrap_instead_of_being_cut() {
    let mut app = mixed();
    let path = "/home/someone/.local/state/berth/default/copies/job-6.log";
    app.apply(Msg::Notice(format!(
        "no clipboard (no display): 63 lines of job-6 saved to {path}"
    )));
    let t = draw(&app, 80, 12);
    insta::assert_snapshot!(t.backend());
    let text: String = t
        .backend()
        .to_string()
        .lines()
        .map(|l| l.trim_matches('"').trim())
        .collect();
    assert!(text.contains(path), "{text}");
}

#[test]
fn tiny_terminals_draw_without_panicking() {
    let mut app = mixed();
    app.apply(Msg::Notice(
        "a notice long enough to wrap on any of these sizes".into(),
    ));
    for (w, h) in [(1, 1), (10, 3), (30, 8), (79, 5)] {
        draw(&app, w, h);
    }
    press(&mut app, KeyCode::Enter);
    app.apply(Msg::LogPage(JobId::from("job-1"), log_page(1..=40)));
    for (w, h) in [(1, 1), (10, 3), (30, 8), (79, 5)] {
        draw(&app, w, h);
        press(&mut app, KeyCode::PageUp);
    }
}
