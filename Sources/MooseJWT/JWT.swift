public enum MooseJWTPlaceholder {}
