//! Keys and answers fed to the app: tabs and selection, which actions each
//! key asks for and when it refuses, `new` badges from events, resume.

use crossterm::event::KeyCode;
use pretty_assertions::assert_eq;

use super::*;

#[test]
fn tabs_and_selection_keys() {
    let mut app = mixed();
    assert_eq!(app.tab(), Tab::Running);
    press(&mut app, KeyCode::Left);
    assert_eq!(app.tab(), Tab::Failed);
    press(&mut app, KeyCode::Right);
    press(&mut app, KeyCode::Right);
    assert_eq!(app.tab(), Tab::Completed);
    press(&mut app, KeyCode::BackTab);
    assert_eq!(app.selected().unwrap().id, JobId::from("job-1"));
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Down);
    assert_eq!(
        app.selected().unwrap().id,
        JobId::from("job-4"),
        "stops at the end"
    );
    // job-2 ends: the selection stays on job-4.
    let mut done = app.job(&JobId::from("job-2")).unwrap().clone();
    done.status = JobStatus::Exited { code: 0 };
    app.apply(Msg::Job(Box::new(JobView {
        info: done,
        snippet: String::new(),
    })));
    assert_eq!(app.selected().unwrap().id, JobId::from("job-4"));
    assert_eq!(press(&mut app, KeyCode::Char('q')), Action::Quit);
    assert!(app.should_quit());
}

#[test]
fn actions_only_where_they_make_sense() {
    let mut app = mixed();
    // A kill asks first: any key but `y` keeps the job.
    assert_eq!(press(&mut app, KeyCode::Char('k')), Action::None);
    assert!(
        app.notice().unwrap().starts_with("kill job-1 ("),
        "{:?}",
        app.notice()
    );
    assert_eq!(press(&mut app, KeyCode::Char('n')), Action::None);
    assert!(app.notice().unwrap().contains("keeps running"));
    press(&mut app, KeyCode::Char('k'));
    assert_eq!(
        press(&mut app, KeyCode::Char('y')),
        Action::Kill(JobId::from("job-1"))
    );
    assert_eq!(press(&mut app, KeyCode::Char('r')), Action::None);
    assert!(
        app.notice()
            .unwrap()
            .contains("r resumes completed or failed jobs")
    );
    // job-1 is not in the foreground, but job-4 is the only one that is.
    assert_eq!(ctrl_r(&mut app), Action::Background(JobId::from("job-4")));
    press(&mut app, KeyCode::Left); // FAILED: job-5 (killed by user), job-6, job-7
    press(&mut app, KeyCode::Down);
    assert_eq!(press(&mut app, KeyCode::Char('k')), Action::None);
    assert!(app.notice().unwrap().contains("is not running"));
    assert_eq!(
        press(&mut app, KeyCode::Char('r')),
        Action::Resume(JobId::from("job-6"))
    );
    let mut quiet = App::new("default", now());
    assert_eq!(ctrl_r(&mut quiet), Action::None);
    assert!(quiet.notice().unwrap().starts_with("no foreground job"));
}

#[test]
fn details_open_clear_the_badge_and_go_back() {
    let mut app = mixed();
    press(&mut app, KeyCode::Down);
    assert!(app.is_new(&JobId::from("job-2")));
    assert_eq!(
        press(&mut app, KeyCode::Enter),
        Action::Open(JobId::from("job-2"), PaneKind::Details)
    );
    assert!(!app.is_new(&JobId::from("job-2")), "viewed");
    assert_eq!(
        press(&mut app, KeyCode::Char('c')),
        Action::Copy(JobId::from("job-2"))
    );
    assert_eq!(press(&mut app, KeyCode::Esc), Action::Close);
    assert!(matches!(app.screen(), Screen::Panel));
    assert!(!app.should_quit(), "Esc in details goes back, not out");
}

#[test]
fn events_badge_and_refresh() {
    let mut app = mixed();
    let id = JobId::from("job-1");
    // Something fresh happened to job-1: fetch it again, badge it, and show
    // the end at once (the manager may be gone before the refresh answers).
    assert_eq!(
        event(&mut app, 1, ended("killed", Some(EndedBy::User))),
        Action::Refresh(id.clone())
    );
    assert!(app.is_new(&id));
    assert_eq!(app.job(&id).unwrap().status.ended_by(), Some(EndedBy::User));
    assert!(
        app.rows(Tab::Failed).iter().any(|j| j.id == id),
        "killed, not completed"
    );
    assert!(!app.rows(Tab::Completed).iter().any(|j| j.id == id));
    assert_eq!(
        app.selected().unwrap().id,
        JobId::from("job-2"),
        "the selection moved on"
    );
    // An agent's kill or a clean exit is no news for the person.
    assert_eq!(
        event(&mut app, 3, ended("success", None)),
        Action::Refresh(JobId::from("job-3"))
    );
    assert!(!app.is_new(&JobId::from("job-3")));
    assert!(!app.is_new(&JobId::from("job-4")));
    event(&mut app, 4, ended("failed", None));
    assert!(app.is_new(&JobId::from("job-4")), "failures are news");
    // History (before the panel attached) is already in the list.
    let old = Event {
        seq: 1,
        ts: ago(3600),
        job: JobId::from("job-6"),
        kind: ended("failed", None),
    };
    assert_eq!(app.apply(Msg::Event(Box::new(old.clone()))), Action::None);
    assert!(!app.is_new(&JobId::from("job-6")));
    let unknown = Event {
        job: JobId::from("job-99"),
        ..old
    };
    assert_eq!(
        app.apply(Msg::Event(Box::new(unknown))),
        Action::Refresh(JobId::from("job-99"))
    );
    // A lost connection is redrawn as such; coming back re-reads everything.
    app.apply(Msg::Connected(false));
    assert!(
        draw(&app, 100, 10)
            .backend()
            .to_string()
            .contains("disconnected, retrying")
    );
    assert_eq!(app.apply(Msg::Connected(true)), Action::RefreshAll);
}

#[test]
fn resume_selects_the_new_job() {
    let mut app = mixed();
    press(&mut app, KeyCode::Left);
    let new = job(8, "make build", JobStatus::Running, StartMode::Background, 0);
    let view = JobView {
        info: new,
        snippet: String::new(),
    };
    app.apply(Msg::Resumed {
        from: JobId::from("job-6"),
        view: Box::new(view),
    });
    assert_eq!(app.tab(), Tab::Running);
    assert_eq!(app.selected().unwrap().id, JobId::from("job-8"));
    assert_eq!(app.notice(), Some("job-6 resumed as job-8"));
}

#[test]
fn killed_jobs_are_not_completed_but_a_keep_alive_that_ran_out_is() {
    let app = mixed();
    let ids = |tab| app.rows(tab).iter().map(|j| j.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(Tab::Completed), ["job-3"]);
    assert_eq!(
        ids(Tab::Failed),
        ["job-5", "job-6", "job-7"],
        "job-5 was killed by user"
    );
    let mut ran_out = app.job(&JobId::from("job-5")).unwrap().clone();
    ran_out.status = JobStatus::Killed {
        signal: Some(15),
        ended_by: EndedBy::System,
        reason: crate::model::StopCause::KeepAliveExpired { secs: 5.0 },
    };
    assert!(Tab::Completed.admits(&ran_out) && !Tab::Failed.admits(&ran_out));
    // Kept alive and stopped by the user before its time: no failure either.
    let mut stopped = app.job(&JobId::from("job-5")).unwrap().clone();
    stopped.spec.keep_alive = Some(30.0);
    assert!(Tab::Completed.admits(&stopped) && !Tab::Failed.admits(&stopped));
}

#[test]
fn a_resume_that_failed_to_start_leaves_no_starting_row() {
    let mut app = mixed();
    press(&mut app, KeyCode::Left);
    let failed = JobStatus::StartFailed {
        error: "image missing".into(),
    };
    // The new job's end (event, then its refreshed record) comes before the
    // resume's own answer, which still says `starting`.
    assert_eq!(
        event(&mut app, 8, ended("start_failed", None)),
        Action::Refresh(JobId::from("job-8"))
    );
    let mut record = job(8, "make build", failed.clone(), StartMode::Background, 0);
    app.apply(Msg::Job(Box::new(JobView {
        info: record.clone(),
        snippet: String::new(),
    })));
    record.status = JobStatus::Starting;
    app.apply(Msg::Resumed {
        from: JobId::from("job-6"),
        view: Box::new(JobView {
            info: record,
            snippet: String::new(),
        }),
    });
    assert!(
        app.rows(Tab::Running)
            .iter()
            .all(|j| j.id != JobId::from("job-8")),
        "no phantom"
    );
    assert_eq!(app.job(&JobId::from("job-8")).unwrap().status, failed);
    assert_eq!(app.tab(), Tab::Failed);
    assert_eq!(app.selected().unwrap().id, JobId::from("job-8"));
}

#[test]
fn a_refresh_keeps_the_cursor_on_the_job_so_r_resumes_it() {
    let mut app = mixed();
    press(&mut app, KeyCode::Left); // FAILED: job-5, job-6, job-7
    press(&mut app, KeyCode::Down);
    assert_eq!(app.selected().unwrap().id, JobId::from("job-6"));
    // A refresh brings job-2 in, ended: it sorts above the cursor.
    let mut jobs: Vec<JobInfo> = Tab::ALL
        .iter()
        .flat_map(|t| app.rows(*t).into_iter().cloned().collect::<Vec<_>>())
        .collect();
    for j in &mut jobs {
        if j.id == JobId::from("job-2") {
            j.status = JobStatus::Exited { code: 2 };
        }
    }
    app.apply(Msg::Jobs(jobs));
    assert_eq!(app.rows(Tab::Failed)[0].id, JobId::from("job-2"));
    assert_eq!(
        press(&mut app, KeyCode::Char('r')),
        Action::Resume(JobId::from("job-6")),
        "the job the user selected, not the row it was on"
    );
}
