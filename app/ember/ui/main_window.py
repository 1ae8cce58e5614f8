"""Ember's main window: lays out the sidebar, chat, composer, model card, Models page and
status bar, and shows what the ChatController's signals say (docs/APP.md). It reads the
store; the controller writes it."""
from __future__ import annotations

import datetime
import logging
import os
import sys
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QShortcut, QTextCursor
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QSizePolicy,
    QStackedWidget,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..storage import paths
from .. import starter
from ..engine import system_info
from ..model_card import display_name, effective_n_ctx
from ..placement import cpu_line, status_line
from ..storage.settings import Settings
from ..storage.store import Store, StoreError
from . import crash, theme
from .chat_controller import ChatController
from .downloads import StarterDownload
from .format import human_bytes
from .widgets import (
    Banner,
    ChatModelBar,
    ChatView,
    Composer,
    ElidedLabel,
    MessageWidget,
    ModelCard,
    NoModelBar,
    QueueBar,
    Sidebar,
    WelcomeView,
)

log = logging.getLogger("ember.ui")

UNDO_SECONDS = 10
STATUS_SECONDS = 8  # how long a one-off status line ("Imported 1 chat") stays
# the chat column keeps room for this many average characters of the font; narrower, the
# model card folds away (View > Model panel brings it back)
CHAT_MIN_CHARS = 40
CHAT_CHROME = 100  # px around a message's text: the view's and message's margins, scroll bar
STOP_LABELS = {"eog": "finished", "length": "length limit", "cancelled": "stopped",
               "context_full": "context full", "stop_string": "finished", "error": "error"}


def process_memory() -> int | None:
    """Resident memory of this process in bytes (None where unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss if sys.platform == "darwin" else rss * 1024
    except Exception:
        return None


def backend_name() -> str:
    try:
        info = system_info()
    except Exception:
        return "CPU"
    return cpu_line(info)


def _can_undo(w: QWidget | None) -> bool:
    if isinstance(w, QLineEdit):
        return w.isUndoAvailable()
    if isinstance(w, (QPlainTextEdit, QTextEdit)):
        return not w.isReadOnly() and w.document().isUndoAvailable()
    return False


def _title_from(text: str) -> str:
    line = " ".join(text.strip().split())
    return line if len(line) <= 48 else line[:47].rstrip() + "…"


class MainWindow(QMainWindow):
    model_loaded = Signal(str)  # path
    model_failed = Signal(str)  # the error text shown
    generation_finished = Signal(dict)
    reply_progress = Signal(int, str)  # message id, the reply so far (once per flushed batch)
    starter_download_done = Signal(str, str)  # "installed" | "failed" | "cancelled", detail
    serving_started = Signal(str)  # the local server's address
    serving_failed = Signal(str)
    file_ready = Signal(str)  # a dropped document is in the library and the chat answers from it

    def __init__(self, data_dir: str | os.PathLike | None = None, *,
                 open_model: str | None = None, restore_last: bool = True):
        super().__init__()
        self.data_dir = Path(data_dir) if data_dir else paths.data_dir()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = crash.setup_logging(self.data_dir)
        self.settings_path = self.data_dir / "settings.json"
        store = Store(self.data_dir / "history.sqlite3")
        store.purge_deleted()  # undo lasts for the session that deleted
        self.store = store
        self.chat = ChatController(store, Settings.load(self.settings_path), self.settings_path,
                                   self)
        self._local_server = None  # made when the Settings switch first asks for it
        self._models_view = None  # made when the Models page is first shown
        self._documents_view = None  # the Documents window, made when first opened
        self._source_box = None  # the last citation opened under a reply
        self.chat.documents_opener = self._documents_for
        self._hub_dialog = None  # File > Find models on Hugging Face…, while open
        self.models_folder = self.data_dir / "models"
        self.starter_source = starter.STARTER
        self.starter_worker: StarterDownload | None = None
        self._models_shown = False
        self._old_workers: list = []  # finished starter downloads until their threads end
        self.current_conv: int | None = None
        # what was typed and not sent, by chat: each chat gets its own back when shown
        self.drafts: dict[int, str] = {}
        self._undo_id: int | None = None
        self._closing = False
        self.last_stats: dict | None = None
        self.colors = theme.apply(QApplication.instance(), self.settings.theme,
                                  self.settings.font_size)

        self.setWindowTitle("Ember")
        self.setObjectName("mainWindow")
        self.setAcceptDrops(True)
        self.resize(1240, 800)
        if self.settings.window_geometry:
            try:
                self.restoreGeometry(QByteArray.fromHex(self.settings.window_geometry.encode()))
            except Exception:
                pass
        self._build()
        self._menus()
        self._fill_preset_menu()
        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.timeout.connect(self._expire_undo)
        self._status_timer = QTimer(self)
        self._status_timer.setSingleShot(True)
        self._status_timer.timeout.connect(lambda: self.status_msg.setText(""))
        self._mem_timer = QTimer(self)
        self._mem_timer.timeout.connect(self._update_memory)
        self._mem_timer.start(2000)
        self._update_memory()

        self.refresh_conversations()
        convs = self.store.conversations()
        if convs:
            self.select_conversation(convs[0].id)
        self._update_starter_available()
        self.welcome.set_recent([p for p in self.settings.recent_models if Path(p).is_file()])
        self._update_view()
        target = open_model or (self.settings.last_model if restore_last else None)
        if target and (open_model or Path(target).is_file()):
            self.open_model_path(str(target))
        log.info("window ready (data folder %s)", self.data_dir)

    # ---- construction ------------------------------------------------------------------
    def _build(self) -> None:
        central = QWidget()
        central.setObjectName("central")
        row = QHBoxLayout(central)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        self.sidebar = Sidebar()
        row.addWidget(self.sidebar)
        center = QWidget()
        col = QVBoxLayout(center)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        banners = QVBoxLayout()
        banners.setContentsMargins(16, 8, 16, 0)
        banners.setSpacing(6)
        self.error_banner = Banner("errorBanner", "errorText")
        self.notice_banner = Banner("noticeBanner", "noticeText")
        banners.addWidget(self.error_banner)
        banners.addWidget(self.notice_banner)
        col.addLayout(banners)
        self.stack = QStackedWidget()
        self.welcome = WelcomeView()
        self.stack.addWidget(self.welcome)
        self.chat_page = QWidget()
        cp = QVBoxLayout(self.chat_page)
        cp.setContentsMargins(0, 0, 0, 0)
        cp.setSpacing(0)
        header = QFrame()
        header.setObjectName("chatHeader")
        hl = QHBoxLayout(header)
        hl.setContentsMargins(24, 10, 16, 10)
        self.chat_title = ElidedLabel("New chat")
        self.chat_title.setObjectName("chatTitle")
        hl.addWidget(self.chat_title, 1)
        self.system_button = QToolButton()
        self.system_button.setObjectName("systemPromptButton")
        self.system_button.setText("System prompt")
        self.system_button.setToolTip("Instructions the model sees before this chat")
        self.system_button.setCheckable(True)
        hl.addWidget(self.system_button)
        # the chat's preset (a system prompt with sampling settings): chosen from its menu
        self.preset_button = QToolButton()
        self.preset_button.setObjectName("presetButton")
        self.preset_button.setText("Preset")
        self.preset_button.setPopupMode(QToolButton.InstantPopup)
        self.preset_menu = QMenu(self.preset_button)
        self.preset_menu.setObjectName("presetMenu")
        self.preset_button.setMenu(self.preset_menu)
        hl.addWidget(self.preset_button)
        self.card_button = QToolButton()
        self.card_button.setObjectName("modelPanelButton")
        self.card_button.setText("Model")
        self.card_button.setToolTip("Show or hide the model panel (View > Model panel, "
                                    "Ctrl+Shift+I)")
        self.card_button.setCheckable(True)
        self.card_button.clicked.connect(self.toggle_model_panel)
        hl.addWidget(self.card_button)
        cp.addWidget(header)
        self.system_edit = QPlainTextEdit()
        self.system_edit.setObjectName("systemPromptEdit")
        self.system_edit.setPlaceholderText("System prompt for this chat (empty: the model's "
                                            "default)")
        self.system_edit.setFixedHeight(72)
        self.system_edit.hide()
        self.system_button.toggled.connect(self.system_edit.setVisible)
        self._system_timer = QTimer(self)
        self._system_timer.setSingleShot(True)
        self._system_timer.setInterval(400)
        self._system_timer.timeout.connect(self._save_system_prompt)
        self.system_edit.textChanged.connect(self._system_timer.start)
        self.chat_view = ChatView()
        # above the first message, scrolling with them: it takes its own room, never theirs
        self.chat_view.set_header(self.system_edit)
        self.system_button.clicked.connect(
            lambda on: on and self.chat_view.scroll_to_top())
        cp.addWidget(self.chat_view, 1)
        comp_wrap = QWidget()
        cw = QVBoxLayout(comp_wrap)
        cw.setContentsMargins(24, 6, 24, 10)
        cw.setSpacing(4)
        self.no_model_bar = NoModelBar()
        self.no_model_bar.setMaximumWidth(860)
        nrow = QHBoxLayout()
        nrow.addStretch(1)
        nrow.addWidget(self.no_model_bar, 100)
        nrow.addStretch(1)
        cw.addLayout(nrow)
        self.queue_bar = QueueBar()
        self.queue_bar.setMaximumWidth(860)
        qrow = QHBoxLayout()
        qrow.addStretch(1)
        qrow.addWidget(self.queue_bar, 100)
        qrow.addStretch(1)
        cw.addLayout(qrow)
        self.chat_model_bar = ChatModelBar()
        self.chat_model_bar.setMaximumWidth(860)
        mrow = QHBoxLayout()
        mrow.addStretch(1)
        mrow.addWidget(self.chat_model_bar, 100)
        mrow.addStretch(1)
        cw.addLayout(mrow)
        self._offers_dismissed: set[int] = set()  # chats whose model offer the user closed
        crow = QHBoxLayout()
        crow.addStretch(1)
        self.composer = Composer()
        self.composer.setMaximumWidth(860)
        crow.addWidget(self.composer, 100)
        crow.addStretch(1)
        cw.addLayout(crow)
        self.composer_hint = QLabel("Enter to send · Shift+Enter for a new line · Esc to stop")
        self.composer_hint.setObjectName("composerHint")
        self.composer_hint.setAlignment(Qt.AlignCenter)
        self.composer_hint.setWordWrap(True)
        cw.addWidget(self.composer_hint)
        cp.addWidget(comp_wrap)
        self.stack.addWidget(self.chat_page)
        col.addWidget(self.stack, 1)
        row.addWidget(center, 1)
        self.card = ModelCard()
        self.card.hide()
        self._card_forced = False  # shown by the user in a window too narrow for it
        row.addWidget(self.card)
        self._row = row
        self.setCentralWidget(central)

        sb = self.statusBar()
        sb.setSizeGripEnabled(False)
        # each segment is shortened to the room the bar has, the whole text in its tooltip
        self.status_tps = self._status_label("statusTokensPerSecond", "— t/s")
        self.status_tps.set_tip("Prompt processing and generation speed of the last reply")
        self.status_ctx = self._status_label("statusContext", "context —")
        self.status_mem = self._status_label("statusMemory", "")
        self.status_mem.set_tip("Memory used by Ember (resident set)")
        self.status_serve = self._status_label("statusServe", "")
        self.status_serve.hide()
        self.status_backend = self._status_label("statusBackend", backend_name())
        self.status_backend.set_tip("Where the model runs (Settings: Run on)")
        self.status_msg = self._status_label("statusMessage", "")
        self.status_msg.setMinimumWidth(1)
        sb.addWidget(self.status_msg, 1)
        for w in (self.status_serve, self.status_tps, self.status_ctx, self.status_mem,
                  self.status_backend):
            sb.addPermanentWidget(w)
        for w in (self.status_msg, self.status_serve, self.status_tps, self.status_ctx,
                  self.status_mem, self.status_backend):
            w.text_changed.connect(self._fit_status)

        # signals
        s = self.sidebar
        s.new_chat.connect(self.new_chat)
        s.selected.connect(self.select_conversation)
        s.renamed.connect(self.rename_conversation)
        s.delete_requested.connect(self.delete_conversation)
        s.search_changed.connect(lambda _t: self.refresh_conversations())
        s.undo.connect(self.undo_delete)
        s.context_menu.connect(self._conversation_menu)
        s.show_models.connect(self.show_models)
        c = self.chat
        c.load_started.connect(self._on_load_started)
        c.model_header.connect(self._on_header)
        c.load_progress.connect(self.card.set_progress)
        c.model_ready.connect(self._on_loaded)
        c.load_failed.connect(self._on_load_failed)
        c.load_cancelled.connect(self._on_load_cancelled)
        c.message_added.connect(self._on_message_added)
        c.reply_started.connect(self._on_reply_started)
        c.reply_prepared.connect(self._on_prepared)
        c.reply_text.connect(self._on_reply_text)
        c.reply_failed.connect(self._on_gen_failed)
        c.reply_finished.connect(self._on_gen_finished)
        c.queue_changed.connect(self._update_view)
        c.store_failed.connect(lambda why: self.show_error("Ember could not save this chat", why))
        c.model_closing.connect(self._stop_serving)
        self._wire_starter_panel(self.welcome.starter_panel)
        self.composer.input.submit.connect(self.send)
        # clicked(bool) would hand its checked flag to send() as the text
        self.composer.send_button.clicked.connect(lambda: self.send())
        self.composer.stop_button.clicked.connect(self.stop)
        self.queue_bar.cancel.connect(lambda: self.chat.unqueue(self.current_conv))
        self.chat_model_bar.load.connect(self.open_model_path)
        self.chat_model_bar.dismissed.connect(self._dismiss_model_offer)
        self.welcome.open_model.connect(self.choose_model)
        self.welcome.use_starter.connect(self.use_starter)
        self.welcome.open_recent.connect(self.open_model_path)
        self.no_model_bar.open_model.connect(self.choose_model)
        self.no_model_bar.use_starter.connect(self.use_starter)
        self.card.cancel_load.connect(self.cancel_load)
        self.card.open_model.connect(self.choose_model)
        for w in (self.composer.input, self.system_edit, self.sidebar.search):
            w.installEventFilter(self)
            if hasattr(w, "viewport"):
                w.viewport().installEventFilter(self)

    @staticmethod
    def _status_label(name: str, text: str) -> ElidedLabel:
        label = ElidedLabel(text)
        label.setObjectName(name)
        # its room as margins, not the bar's style-sheet padding, so the elision counts it
        label.setStyleSheet("padding: 0")
        label.setContentsMargins(8, 0, 8, 0)
        return label

    def _menus(self) -> None:
        mb = self.menuBar()

        def act(menu, text, slot, shortcut=None, name=None):
            a = QAction(text, self)
            if shortcut:
                a.setShortcut(QKeySequence(shortcut))
                a.setShortcutContext(Qt.WindowShortcut)
            a.triggered.connect(slot)
            if name:
                a.setObjectName(name)
            menu.addAction(a)
            return a

        f = mb.addMenu("&File")
        act(f, "New chat", self.new_chat, "Ctrl+N", "actionNewChat")
        act(f, "Open model…", self.choose_model, "Ctrl+O", "actionOpenModel")
        act(f, "Models", self.show_models, "Ctrl+Shift+M", "actionModels")
        act(f, "Find models on Hugging Face…", self.open_hub, None, "actionHub")
        act(f, "Documents…", self.show_documents, "Ctrl+Shift+D", "actionDocuments")
        act(f, "Add an OpenAI-compatible endpoint…", self.choose_endpoint, None,
            "actionAddEndpoint")
        f.addSeparator()
        act(f, "Import chats…", self.choose_import, None, "actionImport")
        act(f, "Export chat as Markdown…", lambda: self.choose_export("md"), None)
        act(f, "Export chat as JSON…", lambda: self.choose_export("json"), None)
        act(f, "Export all chats…", lambda: self.choose_export("all"), None)
        f.addSeparator()
        act(f, "Settings…", self.open_settings, "Ctrl+,", "actionSettings")
        f.addSeparator()
        act(f, "Quit", self.close, "Ctrl+Q", "actionQuit")
        e = mb.addMenu("&Edit")
        for item in (("Undo", "undo", QKeySequence.Undo), ("Redo", "redo", QKeySequence.Redo),
                     None, ("Cut", "cut", QKeySequence.Cut), ("Copy", "copy", QKeySequence.Copy),
                     ("Paste", "paste", QKeySequence.Paste), None,
                     ("Select All", "selectAll", QKeySequence.SelectAll)):
            if item is None:
                e.addSeparator()
                continue
            text, op, keys = item
            a = act(e, text, lambda _=False, op=op: self.edit_text(op), None,
                    f"action{op[0].upper()}{op[1:]}")
            # the text boxes take these keys themselves while they have the focus
            a.setShortcut(keys)
            a.setShortcutContext(Qt.WindowShortcut)
        e.addSeparator()
        act(e, "Find chat", self.focus_search, "Ctrl+F", "actionFind")
        c = mb.addMenu("&Chat")
        act(c, "Regenerate reply", self.regenerate_last, "Ctrl+R", "actionRegenerate")
        self.continue_action = act(c, "Continue reply", self.continue_last, None,
                                   "actionContinue")
        act(c, "Stop", self.stop_current, None, "actionStop")
        c.addSeparator()
        act(c, "Presets…", self.edit_presets, None, "actionPresets")
        c.addSeparator()
        act(c, "Rename chat", lambda: self.current_conv and self.sidebar.rename(self.current_conv),
            "F2")
        act(c, "Pin or unpin chat", self.toggle_pin_current, "Ctrl+Shift+P", "actionPinChat")
        act(c, "Delete chat", lambda: self.current_conv and self.delete_conversation(
            self.current_conv))
        v = mb.addMenu("&View")
        self.card_action = act(v, "Model panel", self.toggle_model_panel, "Ctrl+Shift+I",
                               "actionModelPanel")
        self.card_action.setCheckable(True)
        h = mb.addMenu("&Help")
        act(h, "Log file…", self.show_log_location)
        act(h, "About Ember", self.about)
        esc = QShortcut(QKeySequence(Qt.Key_Escape), self)
        esc.setContext(Qt.WindowShortcut)
        esc.activated.connect(self.stop_current)

    # the Models page and the local server are made on first use: start-up pays for neither
    @property
    def models_view(self):
        if self._models_view is None:
            from .models_view import ModelsView
            v = ModelsView()
            self.stack.addWidget(v)
            v.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Ignored)
            v.back.connect(self.hide_models)
            v.open_model.connect(self._open_from_models)
            v.delete_model.connect(self.delete_model)
            v.forget_model.connect(self.forget_model)
            v.folder_changed.connect(self._refresh_models)
            v.add_endpoint.connect(self.choose_endpoint)
            v.find_on_hub.connect(self.open_hub)
            v.open_endpoint.connect(
                lambda e: self.add_endpoint(e["url"], e["model"], e.get("api_key")))
            v.remove_endpoint.connect(self.remove_endpoint)
            self._wire_starter_panel(v.starter_panel)
            self._models_view = v
            if self.starter_worker is not None:
                v.starter_panel.set_running(True)
        return self._models_view

    def show_source(self, msg_id: int, source: dict) -> None:
        """A citation under a reply, opened: its file, page and passage."""
        where = Path(source["path"]).name + (f", page {source['page']}" if source.get("page")
                                             else "")
        box = QMessageBox(QMessageBox.Information, f"[{source['n']}] {where}",
                          source["text"], QMessageBox.Close, self)
        box.setObjectName("sourceDialog")
        box.setInformativeText(source["path"])
        box.setModal(False)
        box.show()
        self._source_box = box  # kept so the tests (and the window) can find it

    def attach_documents_here(self) -> None:
        """The Documents window's "Use in this chat" / "Stop using in this chat": the chat
        on screen answered from the library, or no longer."""
        v = self._documents_view
        if v is None or self.current_conv is None:
            return
        if v.library.attachment(self.current_conv)[0]:
            self.chat.detach_documents(self.current_conv, v.library)
            self.status_msg.setText("This chat no longer answers from your documents")
        else:
            self.chat.attach_documents(self.current_conv, v.library, v.embedder)
            self.status_msg.setText("This chat now answers from your documents")
        self._show_attachment()

    def _show_attachment(self) -> None:
        """The Documents window's attach button as the chat on screen is."""
        v = self._documents_view
        if v is not None:
            v.set_attached(self.current_conv is not None
                           and v.library.attachment(self.current_conv)[0],
                           self.current_conv is not None)

    @property
    def documents_view(self):
        """The Documents window (library.sqlite3 in the data folder), made on first use."""
        if self._documents_view is None:
            from ..documents.embedder import default_embedder
            from .documents_view import DocumentsView
            v = DocumentsView(self.data_dir / "library.sqlite3",
                              default_embedder(self.models_folder),
                              models_folder=self.models_folder)
            v.setWindowFlag(Qt.Window)
            v.resize(900, 600)
            v.attach_requested.connect(self.attach_documents_here)
            self._documents_view = v
        return self._documents_view

    def _documents_for(self, conv_id: int):
        """The controller's documents_opener: (library, embedder, scope) where the chat
        answers from the library. Until the Documents window exists a read-only look at the
        library says whether this chat is attached, so other chats never pay for opening
        the library and its model; a library that cannot be opened answers no chat."""
        import sqlite3
        if self._documents_view is None:
            path = self.data_dir / "library.sqlite3"
            if not path.exists():
                return None
            try:
                db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                try:
                    row = db.execute("SELECT 1 FROM chat_attachments WHERE conv_id = ?",
                                     (conv_id,)).fetchone()
                finally:
                    db.close()
            except sqlite3.Error:
                return None
            if row is None:
                return None
        try:
            v = self.documents_view
        except Exception as e:  # noqa: BLE001 (a newer or damaged library: logged, not fatal)
            log.warning("the document library could not be opened: %s", e)
            return None
        attached, scope = v.library.attachment(conv_id)
        return (v.library, v.embedder, scope) if attached else None

    def show_documents(self) -> None:
        import sqlite3

        from ..documents.library import LibraryError
        try:
            v = self.documents_view
        except (LibraryError, sqlite3.Error, OSError) as e:  # a newer or damaged library
            self.show_error("The document library could not be opened", str(e))
            return
        self._show_attachment()
        v.show()
        v.raise_()

    def ask_about_file(self, path: str) -> None:
        """A document dropped on a chat: added to the library, then the chat on screen
        answers from that file alone."""
        conv = self.current_conv if self.current_conv is not None else self.new_chat()
        v = self.documents_view
        if v.indexing:
            self.status_msg.setText("The library is indexing; drop the file again when it is done")
            return
        target = str(Path(path).resolve())

        def ready(report) -> None:
            v.indexing_finished.disconnect(ready)
            failed = dict(report.failed) if report is not None else {}
            if report is None or target in failed:
                self.show_error(f"{Path(path).name} could not be read",
                                failed.get(target, v.progress_label.text()))
                return
            self.chat.attach_documents(conv, v.library, v.embedder, scope=[target])
            self._show_attachment()
            self.status_msg.setText(f"Ask about {Path(path).name}: this chat answers from it")
            self.file_ready.emit(target)
        v.indexing_finished.connect(ready)
        self.status_msg.setText(f"Reading {Path(path).name}…")
        v.index([target])

    @property
    def local_server(self):
        if self._local_server is None:
            from .local_server import LocalServer
            ls = LocalServer(self)
            ls.started.connect(self._on_serving)
            ls.failed.connect(self._on_serve_failed)
            ls.stopped.connect(self.status_serve.hide)
            self._local_server = ls
        return self._local_server

    def _wire_starter_panel(self, panel) -> None:
        panel.download.connect(self.download_starter)
        panel.cancel.connect(self.cancel_starter_download)

    # ---- view state -------------------------------------------------------------------------
    # what the controller holds, read by the views (and the tests)
    settings = property(lambda self: self.chat.settings)
    model = property(lambda self: self.chat.model)
    model_info = property(lambda self: self.chat.model_info)
    template = property(lambda self: self.chat.template)
    session = property(lambda self: self.chat.session)
    engine = property(lambda self: self.chat.engine)
    gen_job = property(lambda self: self.chat.gen_job)
    load_job = property(lambda self: self.chat.load_job)

    @property
    def generating(self) -> bool:
        return self.chat.generating

    @property
    def loading(self) -> bool:
        return self.chat.loading

    def _generating_here(self) -> bool:
        """The chat on screen is the one being answered (Send gives way to Stop)."""
        return self.chat.replying_in(self.current_conv)

    def _update_queue_view(self) -> None:
        queue, reply = self.chat.queue, self.chat.reply
        badges = {cid: f"queued {i + 1}" for i, cid in enumerate(queue)}
        if reply is not None:
            badges[reply.conv_id] = "replying"
        self.sidebar.set_badges(badges)
        if self.current_conv in queue and reply is not None:
            busy = self.store.conversation(reply.conv_id)
            self.queue_bar.show_place(queue.index(self.current_conv) + 1,
                                      busy.title if busy else "another chat")
        else:
            self.queue_bar.hide()

    def _update_view(self) -> None:
        has_msgs = bool(self.current_conv and self.store.messages(self.current_conv))
        show_chat = self.model is not None or has_msgs
        page = (self.models_view if self._models_shown else
                self.chat_page if show_chat else self.welcome)
        self.stack.setCurrentWidget(page)
        for w in (self.chat_page, self.welcome, self._models_view):
            if w is None:
                continue
            # the page not shown does not set the window's minimum size
            policy = QSizePolicy.Preferred if w is page else QSizePolicy.Ignored
            w.setSizePolicy(policy, policy)
        self._update_card()
        self.no_model_bar.setVisible(show_chat and self.model is None and not self.loading
                                     and self.chat_model_bar.isHidden())
        self.sidebar.models_button.setChecked(self._models_shown)
        ready = self.model is not None and not self.loading
        here = self._generating_here()
        self.composer.input.setEnabled(True)
        self.composer.set_generating(here)
        self.composer.send_button.setEnabled(ready and not here)
        self._update_queue_view()
        self.composer.input.setPlaceholderText(
            "Message Ember…" if ready else
            ("Loading the model…" if self.loading else "Open a model to continue this chat"))
        self._update_actions()

    # ---- the model panel ----------------------------------------------------------------------
    def chat_min_width(self) -> int:
        """The chat column's least width: CHAT_MIN_CHARS of the font, with the margins."""
        return CHAT_MIN_CHARS * self.chat_view.fontMetrics().averageCharWidth() + CHAT_CHROME

    def chat_least_width(self) -> int:
        """What the chat column keeps beside the card: its least width (chat_min_width), and
        at least half the window (issue 45, bug 2: the card had 40% of a small window)."""
        return max(self.chat_min_width(), self.width() // 2)

    def _card_fits(self) -> bool:
        room = self.width() - self.sidebar.minimumWidth()
        return room - self.card.minimumWidth() >= self.chat_least_width()

    def _update_card(self) -> None:
        """The model card beside the chat: shown while there is a model, unless the user
        folded it (remembered) or the window is too narrow for it and the chat, where it
        folds by itself until the user opens it or the window is wide enough again."""
        fits = self._card_fits()
        if fits:
            self._card_forced = False
        # the Models page has a card per model: the loaded model's own would repeat one
        has = (self.model_info is not None or self.loading) and not self._models_shown
        show = has and (self._card_forced or (self.settings.model_panel and fits))
        # beside the chat where both fit; opened in a narrower window it lies over the
        # chat's right side, so neither is squeezed
        self._place_card(overlay=show and not fits)
        if show != self.card.isVisibleTo(self):
            self.card.setVisible(show)
        # the sidebar gives way first (down to its minimum) where the card is beside the chat
        docked = self.card.minimumWidth() if show and fits else 0
        self.sidebar.limit_width(self.width() - docked - self.chat_least_width())
        # the window's least width is the sidebar's and the chat's: the card never holds
        # a narrower window open (it folds instead)
        self.setMinimumWidth(self.sidebar.minimumWidth()
                             + self.chat_page.minimumSizeHint().width())
        for w in (self.card_button, self.card_action):
            w.setChecked(show)
        self.card_button.setVisible(has)
        self.card_action.setEnabled(has)

    def _fit_status(self) -> None:
        """Each segment's width: where the bar has room the speeds, the context and the
        memory are whole and where the model runs takes what is left; in a narrower bar
        they share it evenly, each shortened with "…" (never drawn over another). A status
        message comes first."""
        sb = self.statusBar()
        first = [w for w in (self.status_serve, self.status_tps, self.status_ctx,
                             self.status_mem) if w.isVisibleTo(sb)]
        items = first + [self.status_backend]
        hints = [w.sizeHint().width() for w in items]
        gaps = sb.layout().spacing() * (len(items) + 1)
        # a message (an import's count, "Loading …") is read once: it keeps its whole
        # width, up to 60% of the bar, and the segments share what is left
        msg = self.status_msg
        msg_width = (min(msg.sizeHint().width(), sb.width() * 3 // 5) if msg.full_text()
                     else msg.minimumWidth())
        room = max(sb.width() - gaps - 24 - msg_width, 0)
        if sum(hints[:-1]) + self.status_backend.minimumSizeHint().width() <= room:
            widths = hints[:-1] + [min(hints[-1], room - sum(hints[:-1]))]
        else:  # even shares, a short segment's unused share going to the others
            widths, left, todo = [0] * len(items), room, sorted(range(len(items)),
                                                                key=lambda i: hints[i])
            for n, i in enumerate(todo):
                widths[i] = min(hints[i], left // (len(todo) - n))
                left -= widths[i]
        for w, width in zip(items, widths):
            w.setFixedWidth(width)

    def _place_card(self, overlay: bool) -> None:
        docked = self._row.indexOf(self.card) >= 0
        if overlay and docked:
            self._row.removeWidget(self.card)
        elif not overlay and not docked:
            self._row.addWidget(self.card)
        if overlay:
            c = self.centralWidget()
            w = self.card.minimumWidth()
            self.card.setGeometry(c.width() - w, 0, w, c.height())
            self.card.raise_()

    def toggle_model_panel(self) -> None:
        """The Model button and View > Model panel: folds the card or opens it."""
        if self.card.isVisibleTo(self):
            if self._card_forced:  # back to folding by itself in this narrow window
                self._card_forced = False
            else:
                self.settings.model_panel = False
        else:
            self.settings.model_panel = True
            self._card_forced = not self._card_fits()
        self._save_settings()
        self._update_card()

    def resizeEvent(self, e) -> None:
        super().resizeEvent(e)
        if hasattr(self, "card_action"):  # (a restored geometry comes before the widgets)
            self._update_card()
            self._fit_status()

    def _update_actions(self) -> None:
        ws = self.chat_view.messages()
        last_assistant = next((w for w in reversed(ws) if w.role == "assistant"), None)
        is_last = bool(ws) and last_assistant is ws[-1]
        busy = self.generating or self.model is None
        for w in ws:
            w.set_actions(last_assistant=(w is last_assistant and is_last
                                          and not (self.chat.reply
                                                   and w.msg_id == self.chat.reply.msg_id)),
                          busy=busy, can_continue=not self.chat.remote)
        self.continue_action.setEnabled(self.chat.can_continue)

    def show_error(self, title: str, detail: str = "", details: str = "") -> None:
        """details: the technical words, folded under the banner's "Details"."""
        if self._status_timer.isActive():  # "Imported 1 chat" is no news after an error
            self._status_timer.stop()
            self.status_msg.setText("")
        self.error_banner.show_message(title, detail, details=details)
        log.warning("%s: %s %s", title, detail, details)

    def show_crash(self, summary: str) -> None:
        self.show_error("Something went wrong inside Ember",
                        f"{summary}\nDetails were written to {self.log_path}")

    # ---- conversations -------------------------------------------------------------------------
    def refresh_conversations(self) -> None:
        self.sidebar.fill(self.store.conversations(self.sidebar.search.text()), self.current_conv)

    def new_chat(self) -> int:
        if self.current_conv is not None and not self.store.messages(self.current_conv):
            conv = self.current_conv  # an empty chat is already open
        else:
            # a system prompt typed while no chat was open (the first launch) is this chat's
            typed = (self.system_edit.toPlainText().strip() if self.current_conv is None
                     else "")
            conv = self.chat.new_conversation(system_prompt=typed or None)
        if self.sidebar.search.text():
            self.sidebar.search.clear()
        self._models_shown = False  # Ctrl+N on the Models page: the new chat, shown
        self.refresh_conversations()
        self.select_conversation(conv)
        self.composer.input.setFocus()
        return conv

    def select_conversation(self, conv_id: int) -> None:
        conv = self.store.conversation(conv_id)
        if conv is None:
            return
        if self._system_timer.isActive():  # typed just now: it belongs to the chat left
            self._system_timer.stop()
            self._save_system_prompt()
        if conv_id != self.current_conv:
            self._swap_draft(conv_id)
        self.current_conv = conv_id
        self.sidebar.select(conv_id)
        self.chat_title.setText(conv.title)
        self.system_edit.blockSignals(True)
        self.system_edit.setPlainText(conv.system_prompt)
        self.system_edit.blockSignals(False)
        self.system_button.setChecked(bool(conv.system_prompt))
        self._fill_preset_menu()
        self._offer_chat_model(conv)
        self.notice_banner.hide()
        self._render_conversation()
        self._show_chat_status()
        self._show_attachment()
        self._update_view()

    def _swap_draft(self, conv_id: int | None) -> None:
        """Keeps the message box's text as the draft of the chat on screen and shows
        conv_id's own; text typed while no chat was open stays, for the chat it opens."""
        box = self.composer.input
        if self.current_conv is not None:
            text = box.toPlainText()
            if text:
                self.drafts[self.current_conv] = text
            else:
                self.drafts.pop(self.current_conv, None)
        elif box.toPlainText():
            return
        box.setPlainText(self.drafts.pop(conv_id, "") if conv_id is not None else "")
        box.moveCursor(QTextCursor.End)

    def _render_conversation(self) -> None:
        self.chat_view.clear()
        if self.current_conv is None:
            return
        conv = self.store.conversation(self.current_conv)
        for m in self.store.messages(self.current_conv):
            w = self._message_widget(m.id, m.role, m.content, m.created, m.complete,
                                     self._reply_name(m.meta, conv))
            if self.chat.reply and m.id == self.chat.reply.msg_id:
                w.content = self.chat.reply.text
                w.set_streaming(True)
            elif m.meta:
                w.set_footer(self._footer(m.meta))
                if m.meta.get("sources"):
                    w.set_sources(m.meta["sources"], m.meta.get("cited", []))
        self._apply_versions()
        self._update_actions()
        self.chat_view.scroll_to_bottom()

    def _apply_versions(self) -> None:
        """Each message's "‹ n/m ›" from the store."""
        if self.current_conv is None:
            return
        counts = self.store.version_counts(self.current_conv)
        for w in self.chat_view.messages():
            w.set_versions(*counts.get(w.msg_id, (1, 1)))

    def show_version(self, msg_id: int, step: int) -> None:
        """Shows the previous (step -1) or next (+1) version of a message, with the
        conversation that followed it."""
        if self.generating or self.current_conv is None:
            return
        ids = self.store.versions(msg_id)
        if msg_id not in ids:
            return
        i = ids.index(msg_id) + step
        if 0 <= i < len(ids):
            old = self.chat_view.widget_for(msg_id)
            offset = self.chat_view.offset_of(old) if old is not None else 0
            self.chat.select_version(ids[i])
            self._render_conversation()
            # the other version where this one was, not the end of the chat
            self.chat_view.keep_at(ids[i], offset)
            self._show_chat_status()
            self._update_view()

    def _reply_name(self, meta: dict | None, conv) -> str:
        """Who wrote a reply, by the one name the app gives a model (display_name): the
        model the reply records, else the one the chat was started with, else the model
        loaded now; "Assistant" only for replies of unknown origin (imported chats)."""
        if meta and meta.get("model_file"):
            return display_name(meta["model_file"])
        if conv is not None and conv.model_path:
            return display_name(conv.model_path)
        return self.model_info["name"] if self.model_info else "Assistant"

    def _message_widget(self, msg_id, role, content, created=None, complete=True,
                        name="Assistant") -> MessageWidget:
        w = MessageWidget(msg_id, role, content, self.colors, created=created, complete=complete,
                          assistant_name=name)
        w.action.connect(self._message_action)
        w.source_clicked.connect(self.show_source)
        w.edit_submitted.connect(self.edit_message)
        return self.chat_view.add(w)

    def rename_conversation(self, conv_id: int, title: str) -> None:
        title = self.chat.rename(conv_id, title)
        self.sidebar.set_title(conv_id, title)
        if conv_id == self.current_conv:
            self.chat_title.setText(title)

    def set_pinned(self, conv_id: int, pinned: bool) -> None:
        """Pins a chat (listed first, under "Pinned") or unpins it; kept in the database."""
        self.chat.set_pinned(conv_id, pinned)
        self.refresh_conversations()

    def toggle_pin_current(self) -> None:
        if self.current_conv is not None:
            self.set_pinned(self.current_conv, not self.sidebar.model.pinned(self.current_conv))

    def delete_conversation(self, conv_id: int) -> None:
        conv = self.store.conversation(conv_id)
        if conv is None:
            return
        if self.chat.replying_in(conv_id):
            self.stop()  # (the window's Stop: the button shows it)
        if self._undo_id is not None:
            self._expire_undo()
        self.chat.delete(conv_id)
        self._undo_id = conv_id
        self.sidebar.show_undo(f"Deleted “{_title_from(conv.title)}”")
        self._undo_timer.start(UNDO_SECONDS * 1000)
        if conv_id == self.current_conv:
            self._swap_draft(None)  # kept for an Undo
            self.current_conv = None
            self.chat_view.clear()
            rest = self.store.conversations(self.sidebar.search.text())
            if rest:
                self.select_conversation(rest[0].id)
        self.refresh_conversations()
        self._update_view()

    def undo_delete(self) -> None:
        if self._undo_id is None:
            return
        cid, self._undo_id = self._undo_id, None
        self._undo_timer.stop()
        self.sidebar.undo_bar.hide()
        self.chat.restore(cid)
        self.refresh_conversations()
        self.select_conversation(cid)

    def _expire_undo(self) -> None:
        self.sidebar.undo_bar.hide()
        self._undo_id = None
        self.chat.purge_deleted()

    def _conversation_menu(self, conv_id: int, pos) -> None:
        m = QMenu(self)
        m.setObjectName("conversationMenu")
        pinned = self.sidebar.model.pinned(conv_id)
        m.addAction("Unpin" if pinned else "Pin", lambda: self.set_pinned(conv_id, not pinned))
        m.addAction("Rename", lambda: self.sidebar.rename(conv_id))
        m.addAction("Export as Markdown…", lambda: self.choose_export("md", conv_id))
        m.addAction("Export as JSON…", lambda: self.choose_export("json", conv_id))
        m.addSeparator()
        m.addAction("Delete", lambda: self.delete_conversation(conv_id))
        m.popup(pos)

    def edit_text(self, op: str) -> None:
        """Edit menu: op ("undo", "cut", "paste", "selectAll"...) on the text box or
        message that has the focus. Undo with nothing to undo there brings back the chat
        just deleted (as Ctrl+Z does outside a text box)."""
        w = self.focusWidget()
        if not isinstance(w, (QLineEdit, QPlainTextEdit, QTextEdit)):
            w = None
        if op == "undo" and self.sidebar.undo_bar.isVisible() and not _can_undo(w):
            self.undo_delete()
        elif w is not None and hasattr(w, op):
            getattr(w, op)()

    def focus_search(self) -> None:
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    # ---- presets -----------------------------------------------------------------------------
    PRESET_NAME_CHARS = 18  # the header's button shortens a longer name (whole in its tooltip)

    def _fill_preset_menu(self) -> None:
        """The Preset button's menu: No preset, each preset (the chat's ticked), the
        editor; the button names the chat's preset."""
        m = self.preset_menu
        m.clear()
        conv = self.store.conversation(self.current_conv) if self.current_conv else None
        current = self.store.preset(conv.preset_id) if conv is not None else None
        group = QActionGroup(m)
        for pid, name in [(None, "No preset")] + [(p.id, p.name) for p in self.store.presets()]:
            a = m.addAction(name)
            a.setCheckable(True)
            a.setChecked(pid == (current.id if current else None))
            group.addAction(a)
            a.triggered.connect(lambda _=False, pid=pid: self.choose_preset(pid))
        m.addSeparator()
        m.addAction("Edit presets…", self.edit_presets)
        if current is None:
            self.preset_button.setText("Preset")
            self.preset_button.setToolTip("Choose a preset for this chat: a system prompt "
                                          "with sampling settings")
        else:
            fm = self.preset_button.fontMetrics()
            short = fm.elidedText(current.name, Qt.ElideRight,
                                  self.PRESET_NAME_CHARS * fm.averageCharWidth())
            self.preset_button.setText(f"Preset: {short}")
            self.preset_button.setToolTip(f"This chat's preset: {current.name}")

    def choose_preset(self, preset_id: int | None) -> None:
        """The chat on screen uses preset_id from its next reply (a new chat when none is
        open); the preset's system prompt becomes the chat's."""
        if self.current_conv is None:
            self.new_chat()
        if self._system_timer.isActive():  # typed just now: saved before the preset's
            self._system_timer.stop()
            self._save_system_prompt()
        prompt = self.chat.set_preset(self.current_conv, preset_id)
        self.system_edit.blockSignals(True)
        self.system_edit.setPlainText(prompt)
        self.system_edit.blockSignals(False)
        if prompt:
            self.system_button.setChecked(True)
        self._fill_preset_menu()

    def edit_presets(self) -> None:
        from .preset_dialog import PresetDialog  # imported when first opened
        conv = self.store.conversation(self.current_conv) if self.current_conv else None
        dlg = PresetDialog(self.chat, self.settings.preset_params(), self,
                           select=conv.preset_id if conv else None)
        try:
            dlg.exec()
        finally:
            dlg.deleteLater()
        self._fill_preset_menu()

    # ---- the chat's own model ----------------------------------------------------------------
    def _offer_chat_model(self, conv) -> None:
        """A chat opened while another model (or none) is loaded offers the model it was
        written with, where that file is still there."""
        path = conv.model_path if conv is not None else None
        info = self.model_info
        loading = self.chat.load_job.path if self.chat.load_job is not None else None
        if (path and Path(path).is_file() and conv.id not in self._offers_dismissed
                and not (info and info.get("path") == path) and loading != path):
            self.chat_model_bar.offer(path, display_name(path), info["name"] if info else None)
        else:
            self.chat_model_bar.hide()

    def _dismiss_model_offer(self) -> None:
        if self.current_conv is not None:
            self._offers_dismissed.add(self.current_conv)
        self.chat_model_bar.hide()
        self._update_view()

    def _save_system_prompt(self) -> None:
        if self.current_conv is not None:
            self.chat.set_system_prompt(self.current_conv, self.system_edit.toPlainText())

    # ---- model loading -----------------------------------------------------------------------------
    def choose_model(self) -> None:
        start = str(Path(self.settings.last_model).parent) if self.settings.last_model else \
            str(paths.models_dir())
        path, _ = QFileDialog.getOpenFileName(self, "Open a model", start,
                                              "GGUF models (*.gguf);;All files (*)",
                                              options=theme.FILE_DIALOG_OPTIONS)
        if path:
            self.open_model_path(path)

    def use_starter(self) -> None:
        p = starter.installed(self.models_folder)
        if p is None:
            self.download_starter()
            return
        self.open_model_path(str(p))

    # ---- the models folder and the starter download ---------------------------------------
    def show_models(self) -> None:
        self._fill_models()
        self._models_shown = True
        self._update_view()

    def _fill_models(self) -> None:
        self.models_view.fill(self.models_folder,
                              self.model_info["path"] if self.model_info else None,
                              starter.installed(self.models_folder) is not None,
                              self.settings.endpoints, self.settings.recent_models)

    def _refresh_models(self) -> None:
        """The Models page as the folder, the recent list and the loaded model are now."""
        if self._models_shown:
            self._fill_models()

    def delete_model(self, path: str) -> bool:
        """Deletes a model file of the models folder once the user agrees; never the model
        in use."""
        from ..model_library import DeleteRefused, check_deletable, delete_model
        name = Path(path).name
        loaded = self.model_info["path"] if self.model_info else None
        try:
            check_deletable(path, self.models_folder, loaded)  # before asking
            answer = QMessageBox.question(
                self, "Delete this model?",
                f"Delete {name} from {Path(path).parent}? The file is removed from the disk; "
                "your chats stay.", QMessageBox.Yes | QMessageBox.No, QMessageBox.No)
            if answer != QMessageBox.Yes:
                return False
            delete_model(path, self.models_folder, loaded)
        except DeleteRefused as e:
            self.show_error(f"{name} was not deleted", str(e))
            return False
        except OSError as e:
            self.show_error(f"Could not delete {name}", str(e))
            return False
        self.settings.forget_model(path)
        self._save_settings()
        self._flash(f"Deleted {name}")
        self._refresh_models()
        return True

    def forget_model(self, path: str) -> None:
        """Takes a model opened from another folder off the Models page (the file stays)."""
        self.settings.forget_model(path)
        self._save_settings()
        self._refresh_models()

    def hide_models(self) -> None:
        self._models_shown = False
        self._update_view()

    def _open_from_models(self, path: str) -> None:
        self.hide_models()
        self.open_model_path(path)

    def open_hub(self) -> None:
        """The Hugging Face catalog (ui/hub_dialog.py); what it downloads lands in the models
        folder, which the Models page shows."""
        from .hub_dialog import HubDialog  # imported when first opened
        if self._hub_dialog is not None:
            self._hub_dialog.raise_()
            return
        dlg = HubDialog(self.models_folder, self.settings.n_ctx, self)
        dlg.downloaded.connect(lambda _path: self._refresh_models())
        dlg.open_model.connect(self.open_model_path)
        dlg.finished.connect(self._hub_closed)
        self._hub_dialog = dlg
        dlg.open()

    def _hub_closed(self) -> None:
        dlg, self._hub_dialog = self._hub_dialog, None
        if dlg is not None:
            dlg.deleteLater()

    def add_endpoint(self, url: str, model_id: str = "", api_key: str | None = None) -> bool:
        """Uses an OpenAI-compatible endpoint's model (a bad address is an error banner;
        a failure to reach it arrives as a failed load)."""
        from ..remote import RemoteEndpoint
        try:
            RemoteEndpoint(url)
        except ValueError as e:
            self.show_error("That is not an endpoint address", str(e))
            return False
        self.error_banner.hide()
        self.hide_models()
        self.chat.open_remote(url.strip(), model_id.strip(), api_key or None)
        return True

    def remove_endpoint(self, entry: dict) -> None:
        """Forgets an endpoint from the Models page, with its API key, once the user agrees
        (a chat open with it goes on until another model is opened)."""
        name = entry["model"] or "the endpoint's first model"
        answer = QMessageBox.question(
            self, "Remove this endpoint?",
            f"Remove {name} at {entry['url']} from Ember? Its API key is deleted too.",
            QMessageBox.Yes | QMessageBox.No, QMessageBox.No)
        if answer != QMessageBox.Yes:
            return
        self.settings.forget_endpoint(entry["url"], entry["model"])
        self._save_settings()
        self.show_models()

    def choose_endpoint(self) -> None:
        from .endpoint_dialog import EndpointDialog
        dlg = EndpointDialog(self)
        try:
            if dlg.exec():
                self.add_endpoint(*dlg.values())
        finally:
            dlg.deleteLater()

    def _starter_panels(self):
        return tuple(p for p in (self.welcome.starter_panel,
                                 self._models_view and self._models_view.starter_panel) if p)

    def _update_starter_available(self) -> None:
        has = starter.installed(self.models_folder) is not None
        self.welcome.set_starter_available(has)
        self.no_model_bar.set_starter_available(has)
        self._refresh_models()

    def download_starter(self) -> None:
        """The user's explicit request: the only time Ember goes to the network."""
        if self.starter_worker is not None:
            return
        w = StarterDownload(self.models_folder, self, source=self.starter_source)
        w.progress.connect(self._on_starter_progress)
        w.installed.connect(self._on_starter_installed)
        w.failed.connect(self._on_starter_failed)
        w.cancelled.connect(self._on_starter_cancelled)
        self.starter_worker = w
        for p in self._starter_panels():
            p.set_running(True)
        log.info("downloading the starter model into %s", self.models_folder)
        w.start()

    def cancel_starter_download(self) -> None:
        if self.starter_worker is not None:
            self.starter_worker.cancel()
            for p in self._starter_panels():
                p.cancelling()

    def _on_starter_progress(self, phase: str, done: int, total: int) -> None:
        for p in self._starter_panels():
            p.set_progress(phase, done, total)

    def _end_starter_download(self, message: str) -> None:
        w, self.starter_worker = self.starter_worker, None
        if w is not None:
            self._retire(w)
        for p in self._starter_panels():
            p.set_running(False)
            p.set_message(message)

    def _on_starter_installed(self, path: str) -> None:
        self._end_starter_download("")
        self._update_starter_available()
        if self._models_shown:
            self.show_models()
        self._flash(f"Installed {Path(path).name}")
        log.info("starter model installed at %s", path)
        self.starter_download_done.emit("installed", path)
        if self.model is None and not self.loading:
            self.open_model_path(path)

    def _on_starter_failed(self, message: str) -> None:
        self._end_starter_download(f"The download failed: {message}")
        self.show_error("The starter model could not be downloaded", message)
        self.starter_download_done.emit("failed", message)

    def _on_starter_cancelled(self) -> None:
        self._end_starter_download("Download cancelled.")
        self.starter_download_done.emit("cancelled", "")

    def open_model_path(self, path: str) -> None:
        self.error_banner.hide()
        self.chat.open_model(str(path))
        if self.chat_model_bar.path == str(path):  # the chat's own model, coming
            self.chat_model_bar.hide()

    def _on_load_started(self, path: str) -> None:
        self.card.set_loading(True, f"Opening {Path(path).name}…")
        self.card.show()
        self.status_msg.setText(f"Loading {Path(path).name}…")
        self._update_view()

    def cancel_load(self) -> None:
        if self.loading:
            self.chat.cancel_load()
            self.card.load_status.setText("Cancelling…")

    def _show_card(self, info: dict, n_ctx: int | None = None) -> None:
        if info.get("remote"):
            self.card.show_remote(info)
        else:
            self.card.show_info(info, n_ctx if n_ctx is not None else info["n_ctx"],
                                self._prompt_format(info))

    def _on_header(self, info: dict) -> None:
        self._show_card(info, None if info.get("remote") else
                        effective_n_ctx(self.settings.n_ctx, info["n_ctx_train"]))
        self.card.set_notice(None)
        self.card.load_status.setText("Connecting…" if info.get("remote") else
                                      "Loading weights…")

    def _finish_loader(self) -> None:
        self.card.set_loading(False)
        self.status_msg.setText("")

    def _on_loaded(self, info: dict) -> None:
        self._finish_loader()
        self._show_card(info)
        notice = None
        if info.get("remote"):
            notice = (f"Replies come from {info['url']}; the endpoint applies its own chat "
                      "template and context length.")
        elif self._raw_mode():
            notice = ("This model has no chat template: Ember uses raw completion (your text "
                      "goes to the model as-is and it continues it).")
        elif self.template.notice:
            notice = self.template.notice
        self.card.set_notice(notice)
        # the app's name last, once: Qt adds the display name to a title not ending in it
        self.setWindowTitle(f"{info['name']} — Ember")
        self._show_placement(info)
        self._show_chat_status()
        self.welcome.set_recent(self.settings.recent_models)
        self._refresh_models()  # a drop on the Models page: the model shows there, "Loaded"
        self._update_view()
        self.composer.input.setFocus()
        self._update_serving()
        self.model_loaded.emit(info["path"])

    def _show_placement(self, info: dict) -> None:
        """Where the loaded model runs, as the engine thread read it after the load."""
        where = info.get("placement")
        if info.get("remote"):
            text, tip = "endpoint", f"Replies come from {info['url']}"
        elif where:
            text, tip = status_line(where["summary"], where["note"])
        else:
            text, tip = backend_name(), "Where the model runs (Settings: Run on)"
        self.status_backend.setText(text)
        # the placement's tip is its text with the note whole ("Where the model runs: …")
        self.status_backend.set_tip(tip, with_text=not where)

    def _on_load_failed(self, path: str, title: str, advice: str, details: str) -> None:
        self._finish_loader()
        self._restore_card()
        self.show_error(f"{title}: {Path(path).name}", advice, details=details)
        self._update_view()
        self.model_failed.emit("\n".join(t for t in (f"{title}: {Path(path).name}", advice,
                                                      details) if t))

    def _on_load_cancelled(self, path: str) -> None:
        self._finish_loader()
        self._restore_card()
        self._flash(f"Loading {Path(path).name} was cancelled")
        self._update_view()

    def _restore_card(self) -> None:
        if self.model_info is not None:
            self._show_card(self.model_info)
        else:
            self.card.info = None
            self.card.hide()

    def _raw_mode(self, info: dict | None = None) -> bool:
        return self.chat.raw_mode(info)

    def _prompt_format(self, info: dict) -> str:
        return self.chat.prompt_format(info)

    def _retire(self, worker) -> None:
        """Keeps a finished or abandoned worker alive until its thread ends."""
        self._old_workers.append(worker)
        worker.finished.connect(lambda: self._old_workers.remove(worker)
                                if worker in self._old_workers else None)

    # ---- chatting -------------------------------------------------------------------------------
    def send(self, text: str | None = None) -> bool:
        text = (text if text is not None else self.composer.input.toPlainText()).strip()
        if not text or self._generating_here():
            return False
        if self.model is None:
            self.show_error("No model is loaded",
                            "Open a .gguf model (Ctrl+O) or drop one on the window first.")
            return False
        if self.current_conv is None:
            self.new_chat()
        conv_id = self.current_conv
        self._system_timer.stop()
        self.composer.input.clear()
        try:
            self._save_system_prompt()  # typed just now: it goes with this message
            self.chat.send(conv_id, text, title=_title_from(text))
        except StoreError as e:
            self.composer.input.setPlainText(text)  # not stored: kept for sending again
            self.show_error("Ember could not save this chat", str(e))
            return False
        conv = self.store.conversation(conv_id)
        self.chat_title.setText(conv.title)
        self.chat_model_bar.hide()  # the chat goes on with the model loaded now
        self.refresh_conversations()
        self._update_view()
        return True

    def unqueue(self, conv_id: int | None) -> None:
        self.chat.unqueue(conv_id)

    def _history(self, conv_id: int, upto: int | None = None) -> list[dict]:
        return self.chat.history(conv_id, upto)

    def _on_message_added(self, conv_id: int, msg_id: int) -> None:
        """The user's message, on screen before its reply starts."""
        if conv_id != self.current_conv or self.chat_view.widget_for(msg_id) is not None:
            return
        m = self.store.message(msg_id)
        self._message_widget(m.id, m.role, m.content)
        self.chat_view.scroll_to_bottom()

    def _on_reply_started(self, reply) -> None:
        w = None
        if reply.conv_id == self.current_conv:  # a queued chat may start while another shows
            w = self.chat_view.widget_for(reply.msg_id)
            if w is None and not reply.continued:
                w = self._message_widget(reply.msg_id, "assistant", "",
                                         name=self.model_info["name"])
                self._apply_versions()
            self.notice_banner.hide()
            self.error_banner.hide()
        if w is not None:
            w.set_footer("")
            w.set_streaming(True)
        self.status_msg.setText("Reading the prompt…")
        self._update_view()

    def _on_prepared(self, reply, info: dict) -> None:
        self.status_msg.setText("Generating…")
        if info.get("notice") and reply.conv_id == self.current_conv:
            self.notice_banner.show_message("Context window", info["notice"])
        if self.model_info and reply.conv_id == self.current_conv:
            self._status(self.status_ctx,
                         f"context {info['n_prompt']:,} / {self.model_info['n_ctx'] or 0:,}")

    def _on_reply_text(self, reply) -> None:
        if reply.conv_id == self.current_conv:
            w = self.chat_view.widget_for(reply.msg_id)
            if w is not None:
                w.set_content(reply.text)
            self._show_live_status(reply)
        self.reply_progress.emit(reply.msg_id, reply.text)  # stored and shown

    def _on_gen_failed(self, reply, message: str) -> None:
        self.show_error("The reply could not be generated" if "context" not in message.lower()
                        else "The context window is full", message)

    def _on_gen_finished(self, g, meta: dict, stats: dict) -> None:
        self.status_msg.setText("")
        self.last_stats = dict(stats, prompt_tps=meta.get("prompt_tps"),
                               gen_tps=meta.get("gen_tps"))
        w = self.chat_view.widget_for(g.msg_id) if g.conv_id == self.current_conv else None
        if not meta:  # nothing written: the store dropped the empty reply
            if w is not None:
                self._render_conversation()
        elif w is not None:
            w.content = g.text
            w.complete = True
            w.set_streaming(False)
            w.set_footer(self._footer(meta))
            if meta.get("sources"):
                w.set_sources(meta["sources"], meta.get("cited", []))
        if stats["stop_reason"] == "context_full" and g.text and w is not None:
            self.notice_banner.show_message(
                "The context window is full",
                "The reply stopped because the conversation reached the context length. "
                "Start a new chat or raise the context length in Settings.")
        if g.conv_id == self.current_conv:
            self._show_chat_status()
        self._update_view()
        self.generation_finished.emit(dict(stats, msg_id=g.msg_id, text=g.text,
                                           conv_id=g.conv_id))

    @staticmethod
    def _footer(meta: dict) -> str:
        if not meta or "generated_tokens" not in meta:
            return ""
        parts = [f"{meta['generated_tokens']} tokens"]
        if meta.get("gen_tps"):
            parts.append(f"{meta['gen_tps']:.1f} t/s")
        reason = STOP_LABELS.get(meta.get("stop_reason", ""), "")
        if reason and reason != "finished":
            parts.append(reason)
        return " · ".join(parts)

    def stop_current(self) -> None:
        """Stop (Esc, the Stop button): the reply in the chat on screen, not one elsewhere."""
        if self._generating_here():
            self.stop()

    def stop(self) -> None:
        """Cancels the running reply (its token: the request, and the engine mid-token)."""
        if self.chat.gen_job is None:
            return
        self.chat.stop()
        self.composer.stop_button.setEnabled(False)
        self.status_msg.setText("Stopping…")

    def _message_action(self, action: str, msg_id: int) -> None:
        if action == "regenerate":
            self.regenerate(msg_id)
        elif action == "continue":
            self.continue_reply(msg_id)
        elif action in ("version-prev", "version-next"):
            self.show_version(msg_id, -1 if action == "version-prev" else 1)

    def _last_assistant(self) -> int | None:
        if self.current_conv is None:
            return None
        msgs = self.store.messages(self.current_conv)
        return msgs[-1].id if msgs and msgs[-1].role == "assistant" else None

    def regenerate_last(self) -> None:
        mid = self._last_assistant()
        if mid is not None:
            self.regenerate(mid)

    def continue_last(self) -> None:
        mid = self._last_assistant()
        if mid is not None:
            self.continue_reply(mid)

    def regenerate(self, msg_id: int) -> None:
        """A new version of the reply beside it; the earlier one stays ("‹ 1/2")."""
        if self.generating or self.model is None or self.current_conv is None:
            return
        msg = self.store.message(msg_id)
        if msg is None:
            return
        self.chat_view.remove(msg_id)
        self.chat.regenerate(self.current_conv, msg_id)

    def continue_reply(self, msg_id: int) -> None:
        if self.generating or not self.chat.can_continue or self.current_conv is None:
            return
        self.chat.continue_reply(self.current_conv, msg_id)

    def edit_message(self, msg_id: int, text: str) -> None:
        """The edited text is a new version of the message, answered anew; the earlier
        version and the conversation that followed it stay ("‹ 1/2")."""
        if self.generating or self.model is None or self.current_conv is None:
            return
        msg = self.store.message(msg_id)
        if msg is None:
            return
        if self.chat.edit(self.current_conv, msg_id, text):
            self._render_conversation()

    # ---- settings ---------------------------------------------------------------------------
    def open_settings(self) -> None:
        from .settings_dialog import SettingsDialog  # imported when first opened
        info = self.model_info
        # the most GPU layers the loaded model has, its output head counted as one
        layers = info["n_layer"] + 1 if info and not info.get("remote") else None
        dlg = SettingsDialog(self.settings, self, max_layers=layers,
                             prompt_format=(self._prompt_format(info)
                                            if info and not info.get("remote") else None))
        try:
            accepted = dlg.exec()
            new = dlg.result_settings() if accepted else None
        finally:
            dlg.deleteLater()
        if new is not None:
            self.apply_settings(new)

    def apply_settings(self, new: Settings) -> None:
        old = self.settings
        restyle = new.theme != old.theme or new.font_size != old.font_size
        self.chat.apply_settings(new)
        if not self.loading:  # a reload restarts it when the model is back
            self._update_serving()
        if restyle:
            self.colors = theme.apply(QApplication.instance(), new.theme, new.font_size)
            self._render_conversation()
            QTimer.singleShot(0, self, self._update_card)  # the widths of the new font
        if self.model_info is not None:
            self._show_card(self.model_info)

    # ---- serving the loaded model ---------------------------------------------------------
    def _update_serving(self) -> None:
        """Serves the loaded local model while the Settings switch is on (an endpoint's
        model is not served again)."""
        info = self.model_info
        want = bool(self.settings.serve and info is not None and not info.get("remote"))
        if not want:
            if self._local_server is not None:
                self._local_server.stop()
            return
        if self.local_server.running and self.local_server.path == info["path"]:
            return
        self.status_serve.setText("starting the server…")
        self.status_serve.show()
        self.local_server.start(self.model, info["path"], self.settings.serve_port)

    def _stop_serving(self) -> None:
        """Before the model it serves is closed: the server's contexts go first."""
        if self._local_server is not None:
            self._local_server.stop()

    def _on_serving(self, url: str) -> None:
        self.status_serve.setText(f"serving {url}")
        self.status_serve.set_tip(f"OpenAI-compatible API at {url}/v1 (this computer only)")
        self.status_serve.show()
        self.serving_started.emit(url)

    def _on_serve_failed(self, message: str) -> None:
        self.status_serve.hide()
        self.show_error("The model is not being served", message)
        self.serving_failed.emit(message)

    def _save_settings(self) -> None:
        self.chat.save_settings()

    # ---- import / export ---------------------------------------------------------------------------
    def export_conversation(self, path: str | os.PathLike, fmt: str,
                            conv_id: int | None = None) -> None:
        try:
            self.chat.export(path, fmt, conv_id or self.current_conv)
        except (OSError, StoreError) as e:
            self.show_error(f"Could not export to {Path(path).name}", str(e))
            return
        self._flash(f"Exported to {path}")

    def import_chats(self, path: str | os.PathLike) -> list[int]:
        try:
            result = self.chat.import_file(path)
        except (OSError, UnicodeDecodeError, StoreError) as e:
            self.show_error(f"Could not import {Path(path).name}", str(e))
            return []
        ids = result.new_ids
        self.refresh_conversations()
        if ids:
            self.select_conversation(ids[0])
        self._flash(result.summary())  # "1 chat imported, 2 already here"
        return ids

    def _docs_dir(self) -> str:
        try:
            import platformdirs
            return platformdirs.user_documents_dir()
        except Exception:
            return str(Path.home())

    def choose_export(self, fmt: str, conv_id: int | None = None) -> None:
        cid = conv_id or self.current_conv
        if cid is None and fmt != "all":
            return
        title = (f"Ember chats {datetime.date.today().isoformat()}" if fmt == "all"
                 else self.store.conversation(cid).title)
        safe = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip() or "chat"
        ext = "md" if fmt == "md" else "json"
        path, _ = QFileDialog.getSaveFileName(self, "Export", str(Path(self._docs_dir()) /
                                                                  f"{safe}.{ext}"),
                                              "Markdown (*.md)" if ext == "md" else "JSON (*.json)",
                                              options=theme.FILE_DIALOG_OPTIONS)
        if path:
            self.export_conversation(path, fmt, cid)

    def choose_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import chats", self._docs_dir(),
                                              "Ember export (*.json)",
                                              options=theme.FILE_DIALOG_OPTIONS)
        if path:
            self.import_chats(path)

    # ---- drag and drop --------------------------------------------------------------------------------
    @staticmethod
    def _dropped_file(mime) -> str | None:
        if mime is None or not mime.hasUrls():
            return None
        for url in mime.urls():
            if url.isLocalFile():
                return url.toLocalFile()
        return None

    def dragEnterEvent(self, e) -> None:
        if self._dropped_file(e.mimeData()):
            e.acceptProposedAction()
            self.welcome.set_drag_active(True)
        else:
            e.ignore()

    def dragMoveEvent(self, e) -> None:
        if self._dropped_file(e.mimeData()):
            e.acceptProposedAction()

    def dragLeaveEvent(self, e) -> None:
        self.welcome.set_drag_active(False)

    def dropEvent(self, e) -> None:
        self.welcome.set_drag_active(False)
        path = self._dropped_file(e.mimeData())
        if not path:
            e.ignore()
            return
        e.acceptProposedAction()
        self.open_dropped(path)

    def open_dropped(self, path: str) -> None:
        from ..documents.parsers import SUFFIXES
        if path.lower().endswith(".json"):
            self.import_chats(path)
        elif self.model is not None and Path(path).suffix.lower() in SUFFIXES:
            self.ask_about_file(path)  # a document on a chat: ask about it
        else:
            self.open_model_path(path)

    def eventFilter(self, obj, e) -> bool:
        # text inputs would take a dropped file as text: route model files to the window
        t = e.type()
        if t in (QEvent.DragEnter, QEvent.DragMove, QEvent.Drop):
            path = self._dropped_file(e.mimeData())
            if path:
                if t == QEvent.Drop:
                    self.dropEvent(e)
                else:
                    e.acceptProposedAction()
                return True
        return super().eventFilter(obj, e)

    # ---- misc -------------------------------------------------------------------------------------
    def _update_memory(self) -> None:
        rss = process_memory()
        self.status_mem.setText(f"memory {human_bytes(rss)}" if rss else "memory —")

    def _flash(self, text: str) -> None:
        """A one-off status line: it goes after STATUS_SECONDS, or at the next error."""
        self.status_msg.setText(text)
        self._status_timer.start(STATUS_SECONDS * 1000)

    def _show_chat_status(self) -> None:
        """Speeds and context use of the chat on screen, from its last counted reply."""
        n_ctx = (f"{self.model_info['n_ctx']:,}" if self.model_info and self.model_info["n_ctx"]
                 else "—")
        msgs = self.store.messages(self.current_conv) if self.current_conv is not None else []
        meta = next((m.meta for m in reversed(msgs)
                     if m.role == "assistant" and "generated_tokens" in m.meta), None)
        if meta is None:
            self._status(self.status_tps, "— t/s")
            self.status_tps.set_tip("Prompt processing and generation speed of this "
                                    "chat's last reply")
            self._status(self.status_ctx, f"context {0 if not msgs else '—'} / {n_ctx}")
            return
        self._show_meta_status(meta, "Last reply")

    def _show_live_status(self, reply) -> None:
        """The running reply's speeds and context use so far (at each flush of its text)."""
        meta = self.chat.live_meta(reply)
        if meta is not None and self.model_info is not None:
            if meta["generated_tokens"] < 2:  # one token is no generation speed yet
                meta["gen_tps"] = None
            self._show_meta_status(meta, "This reply so far")

    def _show_meta_status(self, meta: dict, which: str) -> None:
        n_ctx = (f"{self.model_info['n_ctx']:,}" if self.model_info and self.model_info["n_ctx"]
                 else "—")
        pp, tg = meta.get("prompt_tps", "—"), meta.get("gen_tps")
        pe, total = meta.get("prompt_evaluated"), meta.get("prompt_tokens", 0)
        # "cached" only where the cache held this chat's own earlier prompt; replies
        # stored before that was recorded say it where any of the prompt was reused
        cached = meta.get("prompt_cached", isinstance(pe, int) and pe < total)
        # None: too few new tokens to time (with most of the prompt in the KV cache, or
        # a prompt that short)
        prompt = (f"prompt {pp:.1f} t/s" if isinstance(pp, (int, float)) else
                  "prompt cached" if pp is None and cached else "prompt —")
        gen = f"generation {tg:.1f} t/s" if isinstance(tg, (int, float)) else "generation —"
        self._status(self.status_tps, f"{prompt} · {gen}" if isinstance(tg, (int, float))
                     or "generated_tokens" in meta else "— t/s")
        tip = f"{which}: {total:,} prompt tokens"
        if isinstance(pe, int):
            tip += f", {pe:,} evaluated and {max(total - pe, 0):,} reused from the cache"
            if pp is None:
                tip += " (too few evaluated to time)"
        self.status_tps.set_tip(tip + f"; {meta['generated_tokens']:,} tokens generated")
        used = meta.get("n_past")
        if not isinstance(used, int) and isinstance(meta.get("prompt_tokens"), int):
            used = meta["prompt_tokens"] + meta["generated_tokens"]  # stored before n_past was
        self._status(self.status_ctx, f"context {used:,} / {n_ctx}" if isinstance(used, int)
                     else f"context — / {n_ctx}")
        self.status_ctx.set_tip("Tokens this chat takes in the context window (prompt "
                                "and reply)")

    @staticmethod
    def _status(label: ElidedLabel, text: str) -> None:
        label.setText(text)

    def show_log_location(self) -> None:
        QMessageBox.information(self, "Log file",
                                f"Ember writes its log to:\n{self.log_path}\n\n"
                                f"Native crash reports go to:\n{self.log_path.parent / 'crash.log'}")

    def about(self) -> None:
        from .. import __version__
        QMessageBox.about(self, "About Ember",
                          f"<b>Ember {__version__}</b><br>Offline chat with local language "
                          f"models, on its own inference engine.<br><br>Engine: "
                          f"{backend_name()}<br>Data folder: {self.data_dir}<br>"
                          f"Log: {self.log_path}")

    def closeEvent(self, e) -> None:
        if self._closing:
            return super().closeEvent(e)
        self._closing = True
        self._stop_serving()
        self.chat.shutdown(QApplication.processEvents)
        if self.starter_worker is not None:
            self.starter_worker.cancel()
            self.starter_worker.wait(10000)
        for w in list(self._old_workers):
            w.wait(10000)
        if self._documents_view is not None:  # an indexing run stops after its batch
            self._documents_view.close()
        if self._hub_dialog is not None:  # its download stops, its part kept for next time
            self._hub_dialog.reject()
        for t in (self._mem_timer, self._undo_timer, self._status_timer, self._system_timer):
            t.stop()  # none may fire after the store below is closed
        self._save_system_prompt()
        if self._undo_id is not None:
            self.chat.purge_deleted()
        self.settings.window_geometry = bytes(self.saveGeometry().toHex()).decode()
        self._save_settings()
        self.store.close()
        log.info("window closed")
        super().closeEvent(e)
