pub mod copy_button;
pub mod layout;
