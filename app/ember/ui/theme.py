"""Light and dark themes: a QPalette, a style sheet, and the colours the message
renderer uses for HTML (code blocks, syntax highlighting)."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication, QFileDialog

LIGHT = {
    "name": "light",
    "bg": "#f6f6f7", "surface": "#ffffff", "sidebar": "#eeeff2", "sidebar_sel": "#e2e4e9",
    "text": "#1f2328", "muted": "#6b7280", "border": "#e1e3e8",
    "accent": "#e8590c", "accent_hover": "#d9480f", "accent_text": "#ffffff",
    "accent_soft": "#fff1e8", "disabled": "#b9bdc5",
    "user_bg": "#fff4ec", "user_border": "#f8d9c4", "assistant_bg": "#ffffff",
    "code_bg": "#f6f8fa", "code_header_bg": "#eceff3", "code_border": "#dfe3e8",
    "code_fg": "#24292f", "inline_code_bg": "#eef0f3", "inline_code_fg": "#b3361a",
    "link": "#0b66d6", "error_bg": "#fdecec", "error_border": "#f4b4b4", "error_text": "#8a1f1f",
    "notice_bg": "#fff8e1", "notice_text": "#6b5200",
    "syn_keyword": "#a626a4", "syn_string": "#3f8f3a", "syn_comment": "#8e9099",
    "syn_number": "#986801", "syn_func": "#2f6fd6",
}
DARK = {
    "name": "dark",
    "bg": "#16171a", "surface": "#1e2024", "sidebar": "#131417", "sidebar_sel": "#26292f",
    "text": "#e4e5e7", "muted": "#9a9fa8", "border": "#2d3036",
    "accent": "#ff7a3d", "accent_hover": "#ff8f5c", "accent_text": "#1a0f08",
    "accent_soft": "#33231a", "disabled": "#55595f",
    "user_bg": "#2a211b", "user_border": "#4a3426", "assistant_bg": "#1e2024",
    "code_bg": "#121316", "code_header_bg": "#1a1c20", "code_border": "#2d3036",
    "code_fg": "#d7dae0", "inline_code_bg": "#2a2d33", "inline_code_fg": "#ffab85",
    "link": "#6cb2ff", "error_bg": "#3a1d1f", "error_border": "#6b2c30", "error_text": "#ffc9c9",
    "notice_bg": "#33301a", "notice_text": "#f0e0a0",
    "syn_keyword": "#c678dd", "syn_string": "#98c379", "syn_comment": "#7f848e",
    "syn_number": "#d19a66", "syn_func": "#61afef",
}

# a dialog's default button (what Enter does) drawn as the window's primary button, in
# every dialog, Qt's own (file, message box) included: QDialog QPushButton:default below

# Qt's own file dialog, not the platform's: the platform's (GTK, a portal) is drawn in the
# system's theme, beside a window drawn in Ember's
FILE_DIALOG_OPTIONS = QFileDialog.Option.DontUseNativeDialog


def resolve(theme: str) -> dict:
    if theme == "dark":
        return DARK
    if theme == "light":
        return LIGHT
    app = QApplication.instance()
    try:
        if app is not None and app.styleHints().colorScheme() == Qt.ColorScheme.Dark:
            return DARK
    except AttributeError:  # Qt < 6.5
        pass
    return LIGHT


def palette(c: dict) -> QPalette:
    p = QPalette()
    q = QColor
    p.setColor(QPalette.Window, q(c["bg"]))
    p.setColor(QPalette.WindowText, q(c["text"]))
    p.setColor(QPalette.Base, q(c["surface"]))
    p.setColor(QPalette.AlternateBase, q(c["sidebar"]))
    p.setColor(QPalette.Text, q(c["text"]))
    p.setColor(QPalette.Button, q(c["surface"]))
    p.setColor(QPalette.ButtonText, q(c["text"]))
    p.setColor(QPalette.Highlight, q(c["accent"]))
    p.setColor(QPalette.HighlightedText, q(c["accent_text"]))
    p.setColor(QPalette.ToolTipBase, q(c["surface"]))
    p.setColor(QPalette.ToolTipText, q(c["text"]))
    p.setColor(QPalette.PlaceholderText, q(c["muted"]))
    p.setColor(QPalette.Link, q(c["link"]))
    for role in (QPalette.WindowText, QPalette.Text, QPalette.ButtonText):
        p.setColor(QPalette.Disabled, role, q(c["muted"]))
    return p


def style_sheet(c: dict, font_size: int) -> str:
    return f"""
QMainWindow, QDialog {{ background: {c['bg']}; }}
QToolTip {{ background: {c['surface']}; color: {c['text']}; border: 1px solid {c['border']};
           padding: 4px; }}
#sidebar {{ background: {c['sidebar']}; border-right: 1px solid {c['border']}; }}
#sidebarTitle {{ font-size: {font_size + 5}pt; font-weight: 700; color: {c['text']}; }}
#sidebarEmpty {{ color: {c['muted']}; padding-top: 16px; }}
#sidebarTitle[accent="true"] {{ color: {c['accent']}; }}
#conversationSearch {{ background: {c['surface']}; border: 1px solid {c['border']};
    border-radius: 8px; padding: 6px 8px; }}
#conversationList {{ background: transparent; border: none; outline: none; }}
#conversationList::item {{ padding: 8px 10px; border-radius: 8px; margin: 1px 0;
    color: {c['text']}; }}
#conversationList::item:selected {{ background: {c['sidebar_sel']}; color: {c['text']}; }}
#conversationList::item:hover:!selected {{ background: {c['sidebar_sel']}; }}
QPushButton {{ background: {c['surface']}; color: {c['text']}; border: 1px solid {c['border']};
    border-radius: 8px; padding: 6px 14px; }}
QPushButton:hover {{ border-color: {c['accent']}; }}
QPushButton:disabled {{ color: {c['muted']}; }}
QPushButton:checked {{ border-color: {c['accent']}; color: {c['accent']}; }}
QPushButton[primary="true"], QDialog QPushButton:default {{ background: {c['accent']};
    color: {c['accent_text']}; border: 1px solid {c['accent']}; font-weight: 600; }}
QPushButton[primary="true"]:hover, QDialog QPushButton:default:hover {{
    background: {c['accent_hover']}; }}
QPushButton[primary="true"]:disabled, QDialog QPushButton:default:disabled {{
    background: {c['border']}; border-color: {c['border']}; color: {c['muted']}; }}
QToolButton {{ background: transparent; color: {c['muted']}; border: none; border-radius: 6px;
    padding: 2px 6px; }}
QToolButton:hover {{ background: {c['sidebar_sel']}; color: {c['text']}; }}
QToolButton:disabled, QToolButton:disabled:hover {{ background: transparent;
    color: {c['disabled']}; }}
#chatHeader {{ background: {c['bg']}; border-bottom: 1px solid {c['border']}; }}
#chatTitle {{ font-size: {font_size + 2}pt; font-weight: 600; }}
#messageList, #messageListViewport {{ background: {c['bg']}; border: none; }}
#message {{ background: {c['assistant_bg']}; border: 1px solid {c['border']};
    border-radius: 12px; }}
#message[role="user"] {{ background: {c['user_bg']}; border-color: {c['user_border']}; }}
#messageRole {{ font-weight: 600; color: {c['text']}; }}
#messageFooter, #messageTime {{ color: {c['muted']}; font-size: {font_size - 2}pt; }}
#messageBody {{ background: transparent; border: none; color: {c['text']}; }}
#thoughtsBody {{ background: transparent; border: none; border-left: 2px solid {c['border']};
               padding-left: 8px; color: {c['muted']}; }}
#thoughtsToggle {{ font-style: italic; padding: 2px 6px 2px 2px; }}
#composer {{ background: {c['surface']}; border: 1px solid {c['border']}; border-radius: 14px; }}
#chatInput {{ background: transparent; border: none; color: {c['text']}; }}
#composerHint {{ color: {c['muted']}; font-size: {font_size - 2}pt; }}
#modelCard {{ background: {c['surface']}; border-left: 1px solid {c['border']}; }}
#modelCardScroll, #modelCardBody {{ background: transparent; border: none; }}
#modelName {{ font-size: {font_size + 2}pt; font-weight: 700; }}
#modelCard QLabel[field="true"] {{ color: {c['muted']}; }}
#cardSection {{ color: {c['muted']}; font-size: {font_size - 2}pt; font-weight: 600;
    letter-spacing: 1px; }}
#welcomeView {{ background: {c['bg']}; }}
#welcomeScroll, #welcomeBody {{ background: transparent; border: none; }}
#modelsView, #modelsScroll, #modelsList {{ background: {c['bg']}; border: none; }}
#modelsTitle {{ font-size: {font_size + 6}pt; font-weight: 700; }}
#modelRow {{ background: {c['surface']}; border: 1px solid {c['border']}; border-radius: 12px; }}
#modelRow[loaded="true"] {{ border-color: {c['accent']}; }}
#modelRowName {{ font-weight: 600; font-size: {font_size + 1}pt; }}
#modelRow QLabel[field="true"] {{ color: {c['muted']}; }}
#modelRowError {{ color: {c['error_text']}; }}
#modelRowMoE {{ color: {c['muted']}; border: 1px solid {c['muted']}; border-radius: 4px;
  padding: 0 4px; font-size: {font_size - 1}pt; }}
#modelMemoryFit[warn="true"] {{ color: {c['error_text']}; }}
#welcomeTitle {{ font-size: {font_size + 14}pt; font-weight: 700; }}
#welcomeSubtitle {{ color: {c['muted']}; font-size: {font_size + 1}pt; }}
#dropZone {{ border: 2px dashed {c['border']}; border-radius: 16px; background: {c['surface']}; }}
#dropZone[active="true"] {{ border-color: {c['accent']}; background: {c['accent_soft']}; }}
#errorBanner {{ background: {c['error_bg']}; border: 1px solid {c['error_border']};
    border-radius: 10px; }}
#errorText {{ color: {c['error_text']}; }}
#noticeBanner, #undoBar, #noModelBar {{ background: {c['notice_bg']}; border-radius: 10px; }}
#noticeText, #undoText, #noModelText {{ color: {c['notice_text']}; }}
QProgressBar {{ border: 1px solid {c['border']}; border-radius: 5px; background: {c['bg']};
    height: 10px; text-align: center; color: {c['text']}; }}
QProgressBar::chunk {{ background: {c['accent']}; border-radius: 4px; }}
QStatusBar {{ background: {c['sidebar']}; border-top: 1px solid {c['border']};
    color: {c['muted']}; }}
QStatusBar QLabel {{ color: {c['muted']}; padding: 0 8px; }}
QScrollBar:vertical {{ background: transparent; width: 10px; margin: 0; }}
QScrollBar::handle:vertical {{ background: {c['border']}; border-radius: 4px; min-height: 30px; }}
QScrollBar::add-line:vertical, QScrollBar::sub-line:vertical {{ height: 0; }}
QLineEdit, QPlainTextEdit, QComboBox {{
    background: {c['surface']}; border: 1px solid {c['border']}; border-radius: 6px;
    padding: 4px 6px; color: {c['text']}; }}
#conversationList QLineEdit {{ padding: 1px 6px; border-color: {c['accent']}; }}
QTabWidget::pane {{ background: {c['surface']}; border: 1px solid {c['border']};
    border-radius: 8px; top: -1px; }}
QTabBar::tab {{ background: transparent; color: {c['muted']}; padding: 6px 14px;
    border: none; border-bottom: 2px solid transparent; }}
QTabBar::tab:selected {{ color: {c['text']}; border-bottom-color: {c['accent']}; }}
QTabBar::tab:hover:!selected {{ color: {c['text']}; }}
QDialog QListView, QDialog QTreeView {{ background: {c['surface']}; color: {c['text']};
    border: 1px solid {c['border']}; border-radius: 6px; }}
QDialog QListView::item:selected, QDialog QTreeView::item:selected {{
    background: {c['accent_soft']}; color: {c['text']}; }}
QDialog QLabel[field="true"] {{ color: {c['muted']}; }}
QMenu {{ background: {c['surface']}; border: 1px solid {c['border']}; }}
QMenu::item {{ padding: 5px 22px; }}
QMenu::item:selected {{ background: {c['accent_soft']}; color: {c['text']}; }}
QMenuBar {{ background: {c['bg']}; }}
QMenuBar::item:selected {{ background: {c['sidebar_sel']}; }}
"""


def apply(app: QApplication, theme: str, font_size: int) -> dict:
    """Applies the theme to the whole application; returns its colours."""
    c = resolve(theme)
    app.setStyle("Fusion")
    app.setPalette(palette(c))
    font = QFont(app.font())
    font.setPointSize(font_size)
    app.setFont(font)
    app.setStyleSheet(style_sheet(c, font_size))
    return c
