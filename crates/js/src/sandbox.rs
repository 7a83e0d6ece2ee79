//! The JavaScript sandbox: one QuickJS runtime per thread that runs scripts, reused by
//! every query on that thread, so a query pays for compiling its functions once per
//! thread, not once per document.
//!
//! A runtime has a memory cap and an interrupt handler that stops a call at its deadline
//! (the command's `maxTimeMS` or [`JS_TIME_LIMIT_MS`], whichever comes first); a stopped
//! or exhausted runtime is thrown away, so the next call starts clean. Its cap is
//! reserved from the server's memory budget while it exists (from a command's first
//! script to the command's end), so a server busy with scripts refuses more of them
//! instead of running out of memory. The global object
//! holds only ECMAScript's built-ins, MongoDB's shell types and, as in mongod, the
//! values stored in the database's `system.js` (read when a command's first script
//! needs them): no I/O, no `require`, no host functions. A script's `scope` is passed in
//! as arguments of the function that wraps it, so it shadows those globals.

use crate::bson_conversion::{engine_error, Internal, ShellTypes};
use basalt_error::{Error, ErrorCode, Result};
use basalt_memory::Reservation;
use bson::{Bson, Document};
use rquickjs::context::EvalOptions;
use rquickjs::convert::Coerced;
use rquickjs::function::Args;
use rquickjs::{Array, Context, Ctx, FromJs, Function, Object, Persistent, Runtime, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one call into JavaScript may run when the command sets no `maxTimeMS`.
pub const JS_TIME_LIMIT_MS: u64 = 10_000;

/// The shell's `sleep` wakes this often to see whether its command was killed.
const SLEEP_SLICE_MS: u64 = 10;
/// The memory one thread's runtime may hold.
pub const JS_MEMORY_LIMIT_BYTES: usize = 64 << 20;
/// Deep enough for ordinary recursion, well within a worker thread's stack.
const JS_STACK_SIZE_BYTES: usize = 512 << 10;
/// Compiled functions kept per thread; past this the cache starts over.
const COMPILED_SCRIPTS_MAX: usize = 256;

static SCRIPTING_ENABLED: AtomicBool = AtomicBool::new(true);

/// Reads the documents of the command's database's `system.js` (`{_id: name, value}`).
pub type StoredFunctions = Arc<dyn Fn() -> Result<Vec<Document>> + Send + Sync>;

/// What a command's scripts run under: its `maxTimeMS` deadline and its database's
/// stored functions. Scripts run on the thread that runs the command, which is why
/// thread-locals carry this; a command that hands work to other threads takes it along
/// with [`CommandScripts::current`] and [`CommandScripts::enter`].
#[derive(Clone, Default)]
pub struct CommandScripts {
    deadline: Option<Instant>,
    /// Set when the command is killed (`killOp`): its scripts stop at the next check.
    killed: Option<Arc<AtomicBool>>,
    stored: Option<StoredFunctions>,
}

thread_local! {
    /// What the command this thread is running runs its scripts under.
    static COMMAND: RefCell<CommandScripts> = RefCell::new(CommandScripts::default());
    /// Counts the commands this thread has run: a sandbox serves one command only.
    static COMMAND_NUMBER: Cell<u64> = const { Cell::new(0) };
}

impl CommandScripts {
    /// A command with its `maxTimeMS`, the flag that says it was killed and its
    /// database's `stored` functions.
    pub fn new(
        max_time_ms: Option<i64>,
        killed: Option<Arc<AtomicBool>>,
        stored: Option<StoredFunctions>,
    ) -> CommandScripts {
        let deadline = max_time_ms
            .filter(|ms| *ms > 0)
            .map(|ms| Instant::now() + Duration::from_millis(ms as u64));
        CommandScripts {
            deadline,
            killed,
            stored,
        }
    }

    /// The command this thread is running.
    pub fn current() -> CommandScripts {
        COMMAND.with_borrow(Clone::clone)
    }

    /// Runs the command's `body` (or a part of it, on another thread) in a sandbox of
    /// its own whose globals include the stored functions: what one client's script
    /// leaves behind (a global, a changed prototype) is never seen by another's.
    pub fn enter<R>(&self, body: impl FnOnce() -> R) -> R {
        COMMAND_NUMBER.set(COMMAND_NUMBER.get() + 1);
        let outer = COMMAND.replace(self.clone());
        let result = body();
        // The command's sandbox serves no other: free its memory now, not at the
        // thread's next script.
        SANDBOX.with(|cell| {
            if let Ok(mut slot) = cell.try_borrow_mut() {
                if slot
                    .as_ref()
                    .is_some_and(|sandbox| sandbox.command == COMMAND_NUMBER.get())
                {
                    *slot = None;
                }
            }
        });
        COMMAND.set(outer);
        COMMAND_NUMBER.set(COMMAND_NUMBER.get() + 1);
        result
    }
}

/// Runs a command's `body` with its `maxTimeMS` as the deadline of every script it calls,
/// `killed` as the flag that stops them, and its database's `stored` functions as
/// globals (see [`CommandScripts`]).
pub fn with_command<R>(
    max_time_ms: Option<i64>,
    killed: Option<Arc<AtomicBool>>,
    stored: Option<StoredFunctions>,
    body: impl FnOnce() -> R,
) -> R {
    CommandScripts::new(max_time_ms, killed, stored).enter(body)
}

static NEXT_SCRIPT_ID: AtomicU64 = AtomicU64::new(1);

/// Turns server-side JavaScript on or off for the whole process (mongod's
/// `--noscripting`).
pub fn set_scripting_enabled(enabled: bool) {
    SCRIPTING_ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether server-side JavaScript is on.
pub fn scripting_enabled() -> bool {
    SCRIPTING_ENABLED.load(Ordering::Relaxed)
}

/// Fails with mongod's error for `mapReduce`, `$function` and `$accumulator` when
/// scripting is off (`$where` has its own, see `where_clause.rs`).
pub fn check_scripting_enabled() -> Result<()> {
    if scripting_enabled() {
        Ok(())
    } else {
        Err(Error::location(
            31264,
            "Cannot run server-side javascript without the javascript engine enabled",
        ))
    }
}

/// A JavaScript function ready to be called on any thread: its source wrapped so that its
/// scope arrives as arguments, and an id under which each thread keeps it compiled.
#[derive(Clone, Debug)]
pub struct Script {
    inner: Arc<ScriptSource>,
}

#[derive(Debug)]
struct ScriptSource {
    id: u64,
    /// Wrappers to try in turn: a string that is not a function is first taken as an
    /// expression (`this.a > 1`), then as a function body (`var x = 1; return x`).
    wrappers: Vec<String>,
    scope: Vec<Bson>,
    /// The only fields of its document the script can read, when it reads them by name
    /// (`this.a`, `obj.b`): only those are converted to JS, which matters for wide
    /// documents. `None`: it may read any.
    fields: Option<Vec<String>>,
}

impl Script {
    /// A function (`function (k, v) {...}`), or a string taken as the body of one, whose
    /// free variables may name the fields of `scope`. Syntax errors are reported here.
    pub fn new(code: &str, scope: &Document) -> Result<Script> {
        let names: Vec<&str> = scope
            .keys()
            .map(String::as_str)
            .filter(|name| is_identifier(name))
            .collect();
        let values = names
            .iter()
            .map(|name| scope.get(*name).cloned().unwrap_or(Bson::Null));
        let parameters = names.join(", ");
        // `obj` is the document a `$where` is called on, as in mongod; only a script that
        // names it pays for binding it. Otherwise the script is called directly.
        let binds_obj = code.contains("obj");
        let bodies = if is_function_source(code) {
            if binds_obj {
                vec![format!(
                    "var obj; var fn = ({code}\n); \
                     return function () {{ obj = this; return fn.apply(this, arguments); }};"
                )]
            } else {
                vec![format!("return ({code}\n);")]
            }
        } else {
            let bind = if binds_obj { "obj = this; " } else { "" };
            vec![
                format!("return function () {{ {bind}return ({code}\n); }};"),
                format!("return function () {{ {bind}{code}\n }};"),
            ]
        };
        let declare = if binds_obj { "var obj; " } else { "" };
        let wrappers = bodies
            .into_iter()
            .map(|body| {
                format!(
                    "(function (emit{}{parameters}) {{ {declare}{body} }})",
                    if names.is_empty() { "" } else { ", " }
                )
            })
            .collect();
        let script = Script {
            inner: Arc::new(ScriptSource {
                id: NEXT_SCRIPT_ID.fetch_add(1, Ordering::Relaxed),
                wrappers,
                scope: values.collect(),
                fields: fields_read(code),
            }),
        };
        with_session(|session| session.compile(&script).map(|_| ()))?;
        Ok(script)
    }

    /// Calls the function once with `this` bound to `this` and BSON arguments.
    pub fn call(&self, this: Option<&Document>, args: &[Bson]) -> Result<Bson> {
        with_session(|session| {
            let compiled = session.compile(self)?;
            let this = match this {
                Some(doc) => self.document_to_js(session, doc)?.into_value(),
                None => Value::new_undefined(session.ctx.clone()),
            };
            let args = args
                .iter()
                .map(|arg| session.shell.to_js(arg))
                .collect::<Result<Vec<_>>>()?;
            let result = session.call(&compiled, this, args)?;
            session.shell.to_bson(result)
        })
    }
}

impl Script {
    /// The top-level fields of its document the script reads, when it names them all.
    pub fn fields_read(&self) -> Option<&[String]> {
        self.inner.fields.as_deref()
    }

    /// The document a script is called on, as its `this`.
    pub(crate) fn document_to_js<'js>(
        &self,
        session: &Session<'_, 'js>,
        doc: &Document,
    ) -> Result<rquickjs::Object<'js>> {
        session
            .shell
            .document_to_js(doc, self.inner.fields.as_deref())
    }
}

/// What every object inherits: a script that calls one of these on its document may
/// look at any field.
const OBJECT_PROTOTYPE_MEMBERS: [&str; 12] = [
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
    "__proto__",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];

/// The top-level fields `code` reads from its document, if every mention of `this` and
/// `obj` is followed by `.name`; `None` if it may see the whole document (`this[k]`,
/// `f(this)`, `for (k in obj)`). Strings and comments are not skipped, so a mention
/// there only makes the answer more cautious.
fn fields_read(code: &str) -> Option<Vec<String>> {
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80;
    let mut fields: Vec<String> = Vec::new();
    let mut k = 0;
    while k < bytes.len() {
        if !is_ident(bytes[k]) {
            k += 1;
            continue;
        }
        let start = k;
        while k < bytes.len() && is_ident(bytes[k]) {
            k += 1;
        }
        let word = &code[start..k];
        // `eval` can reach `this` in ways the text does not show.
        if word == "eval" {
            return None;
        }
        let after_dot = code[..start].trim_end().ends_with('.');
        if !(word == "this" || word == "obj") || after_dot {
            continue;
        }
        let rest = code[k..].trim_start();
        let name_start = rest.strip_prefix('.')?.trim_start();
        let name_len = name_start.bytes().take_while(|b| is_ident(*b)).count();
        if name_len == 0 {
            return None;
        }
        let name = &name_start[..name_len];
        // `this.hasOwnProperty('x')` and the like read fields they do not name.
        if OBJECT_PROTOTYPE_MEMBERS.contains(&name) {
            return None;
        }
        if !fields.iter().any(|f| f == name) {
            fields.push(name.to_string());
        }
    }
    Some(fields)
}

/// A compiled script in one session.
pub(crate) struct Compiled<'js> {
    pub(crate) function: Function<'js>,
}

/// The collector of a compiled script's emits (see `makeEmit` in `shell_types.js`).
pub(crate) struct Emits<'js> {
    pub(crate) drain: Function<'js>,
    pub(crate) group: Function<'js>,
}

struct CompiledSaved {
    function: Persistent<Function<'static>>,
    drain_emits: Persistent<Function<'static>>,
    group_emits: Persistent<Function<'static>>,
}

/// One thread's runtime. Fields drop in order: values held for the runtime go before it.
struct Sandbox {
    compiled: HashMap<u64, CompiledSaved>,
    internals: Persistent<Array<'static>>,
    context: Context,
    _runtime: Runtime,
    watch: Rc<Watch>,
    /// The command (see [`with_command`]) this sandbox serves.
    command: u64,
    /// The runtime's cap, taken from the server's memory budget.
    _memory: Reservation,
}

thread_local! {
    static SANDBOX: RefCell<Option<Sandbox>> = const { RefCell::new(None) };
}

/// The limit that stopped a call.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Limit {
    /// The command's `maxTimeMS`.
    Command,
    /// The command was killed (`killOp`).
    Killed,
    /// [`JS_TIME_LIMIT_MS`] for one call.
    Call,
}

/// What the interrupt handler watches. Starting a call only counts it: the handler, which
/// QuickJS runs every few thousand operations, starts the call's clock when it first
/// sees it, so a call costs no clock reading (most end before the handler runs).
struct Watch {
    calls: Cell<u64>,
    /// The call the clock runs for, and when its time is up.
    timed_call: Cell<u64>,
    call_deadline: Cell<Instant>,
    command_deadline: Cell<Option<Instant>>,
    command_killed: RefCell<Option<Arc<AtomicBool>>>,
    stopped_by: Cell<Option<Limit>>,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            calls: Cell::new(0),
            // No call timed yet: the first check starts the clock.
            timed_call: Cell::new(u64::MAX),
            call_deadline: Cell::new(Instant::now()),
            command_deadline: Cell::new(None),
            command_killed: RefCell::new(None),
            stopped_by: Cell::new(None),
        }
    }

    /// Whether to stop the running call.
    fn interrupt(&self) -> bool {
        let now = Instant::now();
        if self.timed_call.get() != self.calls.get() {
            self.timed_call.set(self.calls.get());
            self.call_deadline
                .set(now + Duration::from_millis(JS_TIME_LIMIT_MS));
        }
        let killed = self
            .command_killed
            .borrow()
            .as_ref()
            .is_some_and(|k| k.load(Ordering::Relaxed));
        let stopped_by = if killed {
            Some(Limit::Killed)
        } else if self.command_deadline.get().is_some_and(|d| now >= d) {
            Some(Limit::Command)
        } else if now >= self.call_deadline.get() {
            Some(Limit::Call)
        } else {
            None
        };
        self.stopped_by.set(stopped_by);
        stopped_by.is_some()
    }
}

impl Watch {
    /// The shell's `sleep(ms)`: waits, but never past the call's or the command's time
    /// limit; reaching one stops the script there (an exception that the call's failure
    /// reports as that limit), as the interrupt handler would have.
    fn sleep(&self, ms: f64) -> rquickjs::Result<()> {
        if !self.interrupt() && ms.is_finite() && ms > 0.0 {
            let now = Instant::now();
            let mut until = now + Duration::from_secs_f64(ms / 1000.0);
            until = until.min(self.call_deadline.get());
            if let Some(deadline) = self.command_deadline.get() {
                until = until.min(deadline);
            }
            // In slices, so that a kill is seen while asleep.
            while !self.interrupt() && Instant::now() < until {
                let left = until.saturating_duration_since(Instant::now());
                std::thread::sleep(left.min(Duration::from_millis(SLEEP_SLICE_MS)));
            }
        }
        if self.interrupt() {
            return Err(rquickjs::Error::new_from_js_message(
                "sleep",
                "time",
                "interrupted: time limit reached",
            ));
        }
        Ok(())
    }
}

/// What the shell's types need of the host: `helpers()`, which a script's first use of a
/// helper calls, compiles `shell_helpers.js` and returns it with the natives its helpers
/// call: `sleep` (bounded by the time limits), `log` (print's line, to the server's log as
/// mongod's), `md5` (of a string, in hex) and `bsonSize` (of an object as BSON). Nothing
/// but this one function is made for a command that uses no helper.
fn shell_natives<'js>(ctx: &Ctx<'js>, watch: &Rc<Watch>) -> rquickjs::Result<Function<'js>> {
    let watch = watch.clone();
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>| -> rquickjs::Result<Array<'js>> {
            let factory: Function = ctx.eval(include_str!("shell_helpers.js"))?;
            let natives = helper_natives(&ctx, &watch)?;
            let loaded = Array::new(ctx.clone())?;
            loaded.set(0, factory)?;
            loaded.set(1, natives)?;
            Ok(loaded)
        },
    )
}

/// The natives of `shell_helpers.js` (see [`shell_natives`]).
fn helper_natives<'js>(ctx: &Ctx<'js>, watch: &Rc<Watch>) -> rquickjs::Result<Object<'js>> {
    let natives = Object::new(ctx.clone())?;
    let watched = watch.clone();
    natives.set(
        "sleep",
        Function::new(ctx.clone(), move |ms: f64| watched.sleep(ms))?,
    )?;
    natives.set(
        "log",
        Function::new(ctx.clone(), |line: String| {
            tracing::info!(target: "javascript", "{line}");
        })?,
    )?;
    natives.set(
        "md5",
        Function::new(ctx.clone(), |text: String| {
            use md5::Digest;
            md5::Md5::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        })?,
    )?;
    natives.set(
        "bsonSize",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, internals: Array<'js>, value: Value<'js>| -> rquickjs::Result<f64> {
                let shell = ShellTypes::new(&ctx, internals);
                match shell.to_bson(value) {
                    Ok(Bson::Document(document)) => {
                        Ok(basalt_value::size::document_size_bytes(&document) as f64)
                    }
                    Ok(_) => Err(rquickjs::Error::new_from_js_message(
                        "value",
                        "object",
                        "bsonsize takes an object",
                    )),
                    Err(e) => Err(rquickjs::Error::new_from_js_message(
                        "value", "BSON", e.message,
                    )),
                }
            },
        )?,
    )?;
    Ok(natives)
}

impl Sandbox {
    fn new() -> Result<Sandbox> {
        let mut memory = Reservation::default();
        memory.reserve(JS_MEMORY_LIMIT_BYTES).map_err(|exhausted| {
            let detail = exhausted.to_error("a JavaScript runtime").message;
            Error::new(
                ErrorCode::EXCEEDED_MEMORY_LIMIT,
                format!("Out of memory while trying to initialize javascript scope: {detail}"),
            )
        })?;
        let runtime = Runtime::new().map_err(engine_error)?;
        runtime.set_memory_limit(JS_MEMORY_LIMIT_BYTES);
        runtime.set_max_stack_size(JS_STACK_SIZE_BYTES);
        let watch = Rc::new(Watch::new());
        let watched = watch.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || watched.interrupt())));
        let context = Context::full(&runtime).map_err(engine_error)?;
        let internals = context
            .with(|ctx| {
                let install: Function = ctx.eval(include_str!("shell_types.js"))?;
                let load_helpers = shell_natives(&ctx, &watch)?;
                let internals: Array = install.call((ctx.globals(), load_helpers))?;
                Ok(Persistent::save(&ctx, internals))
            })
            .map_err(engine_error)?;
        let stored = COMMAND.with_borrow(|command| command.stored.as_ref().map(|read| read()));
        if let Some(stored) = stored {
            let stored = stored?;
            context.with(|ctx| {
                let internals = internals.clone().restore(&ctx).map_err(engine_error)?;
                define_stored(&ctx, &ShellTypes::new(&ctx, internals), &stored)
            })?;
        }
        Ok(Sandbox {
            compiled: HashMap::new(),
            internals,
            context,
            _runtime: runtime,
            watch,
            command: COMMAND_NUMBER.get(),
            _memory: memory,
        })
    }
}

/// Makes each `system.js` value a global, as mongod does: a function (or any value)
/// stored as `{_id: "name", value}` is then `name` in every script. As in mongod, a
/// value that does not load (a syntax error) is left out, and is an error only when a
/// script uses it.
fn define_stored<'js>(ctx: &Ctx<'js>, shell: &ShellTypes<'js>, stored: &[Document]) -> Result<()> {
    let globals = ctx.globals();
    for doc in stored {
        let name = match doc.get("_id") {
            Some(Bson::String(name)) => name,
            other => {
                let shown = other.map_or_else(|| "EOO".to_string(), |id| format!("_id: {id}"));
                return Err(Error::location(
                    10209,
                    format!("name has to be a string: {shown}"),
                ));
            }
        };
        let Some(value) = doc.get("value") else {
            return Err(Error::location(10210, "value has to be set"));
        };
        match shell.to_js(value) {
            Ok(value) => globals.set(name.as_str(), value).map_err(engine_error)?,
            Err(_) => drop(ctx.catch()),
        }
    }
    Ok(())
}

/// Runs `body` in this thread's sandbox, creating it on first use and discarding it after
/// a call was stopped (time, memory), so no half-finished state survives.
pub(crate) fn with_session<R>(
    body: impl for<'js> FnOnce(&mut Session<'_, 'js>) -> Result<R>,
) -> Result<R> {
    SANDBOX.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            Error::new(
                ErrorCode::JS_INTERPRETER_FAILURE,
                "JavaScript cannot be called from JavaScript",
            )
        })?;
        if slot
            .as_ref()
            .is_none_or(|sandbox| sandbox.command != COMMAND_NUMBER.get())
        {
            *slot = None;
            *slot = Some(Sandbox::new()?);
        }
        let poisoned = Cell::new(false);
        let result = {
            let Some(sandbox) = slot.as_mut() else {
                unreachable!("the sandbox was just created")
            };
            let Sandbox {
                compiled,
                internals,
                context,
                watch,
                ..
            } = sandbox;
            watch
                .command_deadline
                .set(COMMAND.with_borrow(|command| command.deadline));
            *watch.command_killed.borrow_mut() =
                COMMAND.with_borrow(|command| command.killed.clone());
            context.with(|ctx| {
                let internals = internals.clone().restore(&ctx).map_err(engine_error)?;
                let shell = ShellTypes::new(&ctx, internals);
                let mut session = Session {
                    ctx,
                    shell,
                    compiled,
                    watch,
                    poisoned: &poisoned,
                };
                body(&mut session)
            })
        };
        if poisoned.get() {
            *slot = None;
        }
        result
    })
}

/// Calls into one thread's sandbox, within one borrow of it.
pub(crate) struct Session<'a, 'js> {
    pub(crate) ctx: Ctx<'js>,
    pub(crate) shell: ShellTypes<'js>,
    compiled: &'a mut HashMap<u64, CompiledSaved>,
    watch: &'a Watch,
    poisoned: &'a Cell<bool>,
}

impl<'js> Session<'_, 'js> {
    /// The script compiled in this sandbox, compiling it on first use.
    pub(crate) fn compile(&mut self, script: &Script) -> Result<Compiled<'js>> {
        let source = &script.inner;
        if let Some(saved) = self.compiled.get(&source.id) {
            let restore = |f: &Persistent<Function<'static>>| f.clone().restore(&self.ctx);
            return Ok(Compiled {
                function: restore(&saved.function).map_err(engine_error)?,
            });
        }
        self.arm();
        let mut factory = None;
        let mut last_error = None;
        for wrapper in &source.wrappers {
            match eval_sloppy::<Function>(&self.ctx, wrapper.clone()) {
                Ok(f) => {
                    factory = Some(f);
                    break;
                }
                Err(e) => last_error = Some(self.failure(e)),
            }
        }
        let Some(factory) = factory else {
            return Err(last_error.unwrap_or_else(|| js_failure("empty script")));
        };
        let make_emit: Function = self
            .shell
            .internal(Internal::MakeEmit)
            .map_err(engine_error)?;
        let collector: Array = make_emit.call(()).map_err(|e| self.failure(e))?;
        let emit: Function = collector.get(0).map_err(engine_error)?;
        let drain_emits: Function = collector.get(1).map_err(engine_error)?;
        let group_emits: Function = collector.get(2).map_err(engine_error)?;
        let mut args = Args::new(self.ctx.clone(), 1 + source.scope.len());
        args.push_arg(emit).map_err(engine_error)?;
        for value in &source.scope {
            args.push_arg(self.shell.to_js(value)?)
                .map_err(engine_error)?;
        }
        let function: Value = factory.call_arg(args).map_err(|e| self.failure(e))?;
        let Some(function) = function.into_function() else {
            return Err(js_failure("the script is not a function"));
        };
        if self.compiled.len() >= COMPILED_SCRIPTS_MAX {
            self.compiled.clear();
        }
        self.compiled.insert(
            source.id,
            CompiledSaved {
                function: Persistent::save(&self.ctx, function.clone()),
                drain_emits: Persistent::save(&self.ctx, drain_emits.clone()),
                group_emits: Persistent::save(&self.ctx, group_emits.clone()),
            },
        );
        Ok(Compiled { function })
    }

    /// The collector of what the script, compiled in this sandbox, emits.
    pub(crate) fn emits(&mut self, script: &Script) -> Result<Emits<'js>> {
        self.compile(script)?;
        let Some(saved) = self.compiled.get(&script.inner.id) else {
            return Err(js_failure("the script was not compiled"));
        };
        let restore = |f: &Persistent<Function<'static>>| f.clone().restore(&self.ctx);
        Ok(Emits {
            drain: restore(&saved.drain_emits).map_err(engine_error)?,
            group: restore(&saved.group_emits).map_err(engine_error)?,
        })
    }

    /// Calls a compiled script with `this` and arguments, under the time limit.
    pub(crate) fn call(
        &self,
        compiled: &Compiled<'js>,
        this: Value<'js>,
        args: Vec<Value<'js>>,
    ) -> Result<Value<'js>> {
        self.arm();
        let mut call = Args::new(self.ctx.clone(), args.len());
        call.this(this).map_err(engine_error)?;
        for arg in args {
            call.push_arg(arg).map_err(engine_error)?;
        }
        compiled
            .function
            .call_arg(call)
            .map_err(|e| self.failure(e))
    }

    /// Counts a new call, which gets its own time limit.
    fn arm(&self) {
        self.watch.calls.set(self.watch.calls.get() + 1);
        self.watch.stopped_by.set(None);
    }

    /// The MongoDB error for a failed call: the script's exception with its message, or
    /// the time or memory limit that stopped it.
    pub(crate) fn failure(&self, error: rquickjs::Error) -> Error {
        if !matches!(error, rquickjs::Error::Exception) {
            if matches!(error, rquickjs::Error::Allocation) {
                self.poisoned.set(true);
                return js_failure("Out of memory");
            }
            return engine_error(error);
        }
        let thrown = self.ctx.catch();
        if let Some(limit) = self.watch.stopped_by.get() {
            self.poisoned.set(true);
            return match limit {
                Limit::Command => Error::new(
                    ErrorCode::MAX_TIME_MS_EXPIRED,
                    "operation exceeded time limit",
                ),
                Limit::Killed => Error::new(ErrorCode::INTERRUPTED, "operation was interrupted"),
                Limit::Call => js_failure(format!(
                    "JavaScript execution interrupted: exceeded the time limit of \
                     {JS_TIME_LIMIT_MS} ms"
                )),
            };
        }
        // QuickJS out of memory cannot allocate the error it would throw: it throws null.
        if thrown.is_null() {
            self.poisoned.set(true);
            return js_failure("Out of memory (or the script threw null)");
        }
        let message = describe(thrown);
        if message.contains("out of memory") {
            self.poisoned.set(true);
            return js_failure(format!("Out of memory: {message}"));
        }
        js_failure(message)
    }
}

/// Evaluates user code as mongod does: in sloppy mode, where `x = 1` in a map function
/// makes a variable rather than an error (rquickjs evaluates strict code by default).
pub(crate) fn eval_sloppy<'js, T: FromJs<'js>>(
    ctx: &Ctx<'js>,
    source: String,
) -> rquickjs::Result<T> {
    let mut options = EvalOptions::default();
    options.strict = false;
    ctx.eval_with_options(source, options)
}

/// What a thrown value says: `Error: message` for errors, the value as text otherwise.
fn describe(thrown: Value<'_>) -> String {
    let stack: Option<String> = thrown
        .as_object()
        .and_then(|object| object.get::<_, Option<String>>("stack").ok().flatten());
    let text = thrown
        .get::<Coerced<String>>()
        .map(|c| c.0)
        .unwrap_or_else(|_| "unknown JavaScript exception".to_string());
    match stack {
        Some(stack) if !stack.trim().is_empty() => format!("{text} :\n{}", stack.trim_end()),
        _ => text,
    }
}

pub(crate) fn js_failure(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::JS_INTERPRETER_FAILURE, message)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && !matches!(name, "emit" | "obj" | "fn")
}

/// Whether `code` is a function expression rather than an expression or body to wrap.
fn is_function_source(code: &str) -> bool {
    let code = code.trim_start();
    if code.starts_with("function") || code.starts_with("async function") {
        return true;
    }
    // An arrow function: `x => ...` or `(a, b) => ...`.
    code.split_once("=>").is_some_and(|(head, _)| {
        let head = head.trim();
        is_identifier(head)
            || (head.starts_with('(')
                && head.ends_with(')')
                && head[1..head.len() - 1]
                    .split(',')
                    .all(|p| p.trim().is_empty() || is_identifier(p.trim())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(code: &str, args: &[Bson]) -> Result<Bson> {
        Script::new(code, &Document::new())?.call(None, args)
    }

    #[test]
    fn functions_take_bson_arguments_and_return_bson() {
        assert_eq!(
            run(
                "function (a, b) { return a + b; }",
                &[Bson::Int32(1), Bson::Double(2.5)]
            )
            .unwrap(),
            Bson::Double(3.5)
        );
        assert_eq!(
            run("(s) => s.toUpperCase()", &[Bson::String("ab".into())]).unwrap(),
            Bson::String("AB".into())
        );
    }

    #[test]
    fn strings_are_expressions_or_bodies() {
        let this = doc! {"a": 2, "b": 1};
        let expr = Script::new("this.a > this.b", &Document::new()).unwrap();
        assert_eq!(expr.call(Some(&this), &[]).unwrap(), Bson::Boolean(true));
        let body = Script::new("var d = obj.a - obj.b; return d == 1", &Document::new()).unwrap();
        assert_eq!(body.call(Some(&this), &[]).unwrap(), Bson::Boolean(true));
    }

    #[test]
    fn scope_values_are_free_variables() {
        let script = Script::new(
            "function () { return this.x * factor; }",
            &doc! {"factor": 3},
        )
        .unwrap();
        assert_eq!(
            script.call(Some(&doc! {"x": 2}), &[]).unwrap(),
            Bson::Double(6.0)
        );
    }

    #[test]
    fn exceptions_and_syntax_errors_are_js_interpreter_failures() {
        let e = run("function () { throw new Error('boom'); }", &[]).unwrap_err();
        assert_eq!(e.code, ErrorCode::JS_INTERPRETER_FAILURE);
        assert!(e.message.contains("Error: boom"), "{}", e.message);
        let e = Script::new("function ( {", &Document::new()).unwrap_err();
        assert_eq!(e.code, ErrorCode::JS_INTERPRETER_FAILURE);
        assert!(e.message.contains("SyntaxError"), "{}", e.message);
    }

    #[test]
    fn runaway_loops_stop_at_the_deadline_and_the_sandbox_recovers() {
        let script = Script::new("function () { while (true) {} }", &Document::new()).unwrap();
        let e = with_command(Some(50), None, None, || script.call(None, &[])).unwrap_err();
        assert_eq!(e.code, ErrorCode::MAX_TIME_MS_EXPIRED);
        assert_eq!(
            run("function () { return 1; }", &[]).unwrap(),
            Bson::Double(1.0)
        );
    }

    #[test]
    fn memory_bombs_stop_at_the_cap() {
        let e = run(
            "function () { var a = []; while (true) a.push(new Array(1000).fill(1)); }",
            &[],
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::JS_INTERPRETER_FAILURE);
        assert!(e.message.contains("Out of memory"), "{}", e.message);
        assert_eq!(
            run("function () { return 2; }", &[]).unwrap(),
            Bson::Double(2.0)
        );
    }

    #[test]
    fn each_command_gets_a_fresh_sandbox() {
        let leak = "function () { leaked = 1; Array.prototype.evil = 1; return 0; }";
        with_command(None, None, None, || run(leak, &[])).unwrap();
        let look = "function () { return typeof leaked + typeof [].evil; }";
        let seen = with_command(None, None, None, || run(look, &[])).unwrap();
        assert_eq!(seen, Bson::String("undefinedundefined".into()));
    }

    #[test]
    fn stored_functions_are_globals_that_scope_shadows() {
        let stored = || -> Option<StoredFunctions> {
            Some(Arc::new(|| {
                Ok(vec![
                    doc! {"_id": "twice", "value": Bson::JavaScriptCode("function (x) { return 2 * x; }".into())},
                    doc! {"_id": "base", "value": 10},
                    doc! {"_id": "broken", "value": Bson::JavaScriptCode("function ( {".into())},
                ])
            }))
        };
        let call = |code: &str, scope: Document| {
            with_command(None, None, stored(), || {
                Script::new(code, &scope)?.call(None, &[])
            })
        };
        assert_eq!(
            call("function () { return twice(base); }", Document::new()).unwrap(),
            Bson::Double(20.0)
        );
        assert_eq!(
            call("function () { return twice(base); }", doc! {"base": 1}).unwrap(),
            Bson::Double(2.0)
        );
        let e = call("function () { return broken(); }", Document::new()).unwrap_err();
        assert!(e.message.contains("broken is not defined"), "{}", e.message);
        let unnamed: Option<StoredFunctions> =
            Some(Arc::new(|| Ok(vec![doc! {"_id": 1, "value": 2}])));
        let e = with_command(None, None, unnamed, || {
            run("function () { return 1; }", &[])
        })
        .unwrap_err();
        assert_eq!(
            (e.code.0, e.message.as_str()),
            (10209, "name has to be a string: _id: 1")
        );
    }

    #[test]
    fn scripts_that_name_their_fields_see_only_those() {
        let fields = |code: &str| fields_read(code);
        assert_eq!(
            fields("this.a > obj.b && this.a < 5"),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            fields("function () { emit(this._id, this . v.w); }"),
            Some(vec!["_id".into(), "v".into()])
        );
        assert_eq!(fields("x.this + myobj"), Some(vec![]));
        assert_eq!(fields("this['a']"), None);
        assert_eq!(fields("f(this)"), None);
        assert_eq!(fields("for (var k in obj) {}"), None);
        assert_eq!(fields("this.a && this.hasOwnProperty('b')"), None);
        assert_eq!(fields("this.a && eval('th' + 'is.b')"), None);
        let script = Script::new("this.a + this.b", &Document::new()).unwrap();
        let wide = doc! {"a": 1, "b": 2, "c": 3};
        assert_eq!(script.call(Some(&wide), &[]).unwrap(), Bson::Double(3.0));
        let whole = Script::new("Object.keys(this).length", &Document::new()).unwrap();
        assert_eq!(whole.call(Some(&wide), &[]).unwrap(), Bson::Double(3.0));
    }

    #[test]
    fn there_is_no_io_or_require() {
        let e = run("function () { return require('fs'); }", &[]).unwrap_err();
        assert!(
            e.message.contains("require is not defined"),
            "{}",
            e.message
        );
        assert_eq!(
            run("function () { return typeof std + typeof os; }", &[]).unwrap(),
            Bson::String("undefinedundefined".into())
        );
    }
}
